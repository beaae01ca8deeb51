package mcpserver

import (
	"encoding/base64"
	"encoding/json"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/baton-dev/baton/agui"
)

// taskPageSize bounds the tasks of one tasks/list page: each is read from its run's log.
const taskPageSize = 20

// maxCursorLen bounds a cursor a client sends back (ours are well under it).
const maxCursorLen = 512

type listParams struct {
	mcp.ParamsBase
	Cursor string `json:"cursor,omitempty"`
}

// listResult is the result of tasks/list (2025-11-25: tasks and nextCursor), with the
// resultType a 2026-07-28 result carries.
type listResult struct {
	mcp.ResultBase
	ResultType string `json:"resultType"`
	Tasks      []task `json:"tasks"`
	NextCursor string `json:"nextCursor,omitempty"`
}

// listCursor is a position in the list: after the thread created at T (Unix ns) with id ID.
type listCursor struct {
	T  int64  `json:"t"`
	ID string `json:"id"`
}

func cursorOf(th ThreadInfo) string {
	b, _ := json.Marshal(listCursor{T: th.CreatedAt.UnixNano(), ID: th.ID})
	return base64.RawURLEncoding.EncodeToString(b)
}

// parseCursor reads a cursor of tasks/list: nil for none, -32602 for one this server did
// not give.
func parseCursor(s string) (*listCursor, error) {
	if s == "" {
		return nil, nil
	}
	var c listCursor
	b, err := base64.RawURLEncoding.DecodeString(s)
	if len(s) > maxCursorLen || err != nil || json.Unmarshal(b, &c) != nil || !agui.ValidID(c.ID) {
		return nil, invalidParams("the cursor is not one this server gave: start again without one")
	}
	return &c, nil
}

// listBatch is how many threads tasks/list asks the engine for at a time: a page's, and
// one more that tells whether a next page exists.
const listBatch = taskPageSize + 1

// maxListExamined bounds the threads one tasks/list examines: a thread of a tool this
// server no longer serves, an expired task or a thread without a run is examined and left
// out, and each costs a read. Past the bound the page ends, shorter, with a cursor.
const maxListExamined = 5 * taskPageSize

// position is the thread a cursor names: where the next page starts after.
func (c *listCursor) position() *ThreadInfo {
	if c == nil {
		return nil
	}
	return &ThreadInfo{ID: c.ID, CreatedAt: time.Unix(0, c.T)}
}
