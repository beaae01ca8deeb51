package mcpserver

import (
	"cmp"
	"encoding/base64"
	"encoding/json"
	"slices"

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

// taskThread is a thread a call started, and the tool it is a task of.
type taskThread struct {
	ThreadInfo
	tool tool
}

// taskThreads returns the threads that are tasks of the tools in byTag (a thread an older
// Baton started has no tag and is left out), newest first, after the cursor.
func taskThreads(threads []ThreadInfo, byTag map[string]tool, after *listCursor) []taskThread {
	var out []taskThread
	for _, th := range threads {
		tag, ok := threadTag(th.ID)
		t, known := byTag[tag]
		if !ok || tag == "" || !known || (after != nil && !listedAfter(th, *after)) {
			continue
		}
		out = append(out, taskThread{ThreadInfo: th, tool: t})
	}
	slices.SortFunc(out, func(a, b taskThread) int {
		if c := cmp.Compare(b.CreatedAt.UnixNano(), a.CreatedAt.UnixNano()); c != 0 {
			return c
		}
		return cmp.Compare(b.ID, a.ID)
	})
	return out
}

// listedAfter reports whether th comes after the cursor's position in the list's order
// (creation time, then id, both descending).
func listedAfter(th ThreadInfo, c listCursor) bool {
	t := th.CreatedAt.UnixNano()
	return t < c.T || (t == c.T && th.ID < c.ID)
}
