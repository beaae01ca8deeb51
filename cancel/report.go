package cancel

// Describe names the piece a report is about, for a message to the caller: its kind, name
// and task id ("a2a_task research task t-1").
func (r Report) Describe() string {
	s := string(r.Kind) + " " + r.Name
	if r.ID != "" {
		s += " task " + r.ID
	}
	return s
}

// Outstanding sorts reports into the pieces still pending and those whose cancellation
// failed (each described, a failure with its result); a confirmed, already-terminal,
// cancelled or moved piece is settled.
func Outstanding(reps []Report) (pending, failed []string) {
	for _, rep := range reps {
		switch rep.Result {
		case ResultPending:
			pending = append(pending, rep.Describe())
		case ResultConfirmed, ResultAlreadyTerminal, ResultCancelled, ResultMoved, "":
		default:
			failed = append(failed, rep.Describe()+" ("+rep.Result+")")
		}
	}
	return pending, failed
}
