package subagent

import (
	"bytes"
	"testing"

	sdk "github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A completed delegation's Result lists its artifacts' file parts, inline bytes bounded by
// MaxFileBytes over all of them, the count by maxFiles.
func TestResultFilesAreBounded(t *testing.T) {
	t.Parallel()
	d := &delegation{a: &Agent{opts: Options{}.withDefaults()}, tr: newTranscript(nil)}
	d.pace = newPacer(-1, d.tr)
	half := bytes.Repeat([]byte("x"), MaxFileBytes/2+1)
	parts := []*sdk.Part{
		{Content: sdk.Text("see the files")},
		{Content: sdk.Raw(half), Filename: "a.bin", MediaType: "application/octet-stream"},
		{Content: sdk.Raw(half), Filename: "b.bin"},
		{Content: sdk.Raw([]byte("tiny")), Filename: "c.txt", MediaType: "text/plain"},
		{Content: sdk.URL("https://example.com/d.pdf"), Filename: "d.pdf", MediaType: "application/pdf"},
	}
	for i := 0; i < maxFiles; i++ {
		parts = append(parts, &sdk.Part{Content: sdk.URL("https://example.com/more")})
	}
	d.applyTask(&sdk.Task{ID: "t", Status: sdk.TaskStatus{State: sdk.TaskStateCompleted},
		Artifacts: []*sdk.Artifact{{ID: "art", Parts: parts}}})
	res := d.result()
	require.Len(t, res.Files, maxFiles)
	assert.Equal(t, 4, res.FilesOmitted)
	assert.Equal(t, File{Name: "a.bin", MediaType: "application/octet-stream", ArtifactID: "art", Bytes: half, Size: int64(len(half))}, res.Files[0])
	assert.Nil(t, res.Files[1].Bytes, "no room left for the second half")
	assert.Equal(t, int64(len(half)), res.Files[1].Size)
	assert.Equal(t, []byte("tiny"), res.Files[2].Bytes)
	assert.Equal(t, "https://example.com/d.pdf", res.Files[3].URI)
	assert.False(t, res.Files[3].Inline())
	assert.Contains(t, res.Text, "[file: a.bin (application/octet-stream)]", "the model still reads a line per file")

	d.applyTask(&sdk.Task{ID: "t", Status: sdk.TaskStatus{State: sdk.TaskStateFailed},
		Artifacts: []*sdk.Artifact{{ID: "art", Parts: parts}}})
	assert.Empty(t, d.result().Files, "only a completed task hands its files on")
}

// A task read again (a poll, a resubscription's snapshot) keeps its files' bytes: the
// snapshot's views replace the old ones, and so does their share of the bound.
func TestResultFilesSurviveSnapshots(t *testing.T) {
	t.Parallel()
	d := &delegation{a: &Agent{opts: Options{}.withDefaults()}, tr: newTranscript(nil)}
	d.pace = newPacer(-1, d.tr)
	big := bytes.Repeat([]byte("y"), MaxFileBytes*3/4)
	task := &sdk.Task{ID: "t", Status: sdk.TaskStatus{State: sdk.TaskStateWorking},
		Artifacts: []*sdk.Artifact{{ID: "art", Parts: []*sdk.Part{{Content: sdk.Raw(big), Filename: "big.bin"}}}}}
	for range 3 {
		d.applyTask(task)
	}
	task.Status.State = sdk.TaskStateCompleted
	d.applyTask(task)
	res := d.result()
	require.Len(t, res.Files, 1)
	assert.Equal(t, big, res.Files[0].Bytes)
}
