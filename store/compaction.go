package store

// StepCompaction is the journal step of a compaction (DESIGN §3): older turns of a thread
// summarised by the model into one message, with what it replaced in the step's detail.
const StepCompaction = "compaction"
