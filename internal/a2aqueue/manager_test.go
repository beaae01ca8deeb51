package a2aqueue

import (
	"context"
	"testing"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2asrv/eventqueue"
	"go.uber.org/goleak"
)

// A reader created after the task's queue was destroyed (a resubscription
// racing the end of the execution) must not leave a broker behind.
func TestReaderAfterDestroyLeavesNothing(t *testing.T) {
	defer goleak.VerifyNone(t)
	ctx := context.Background()
	m, id, w, first := openQueue(t)
	if err := m.Destroy(ctx, id); err != nil {
		t.Fatal(err)
	}
	_ = w.Close()
	_ = first.Close()

	late, err := m.CreateReader(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if err := late.Close(); err != nil {
		t.Fatal(err)
	}
	if n := len(m.gens); n != 0 {
		t.Fatalf("%d queue generations left, want 0", n)
	}
}

// While an execution writes, readers come and go without ending the queue.
func TestReadersOfALiveQueueDoNotEndIt(t *testing.T) {
	defer goleak.VerifyNone(t)
	ctx := context.Background()
	m, id, w, r1 := openQueue(t)
	_ = r1.Close()
	r2, err := m.CreateReader(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		_, err := r2.Read(ctx)
		done <- err
	}()
	if err := w.Write(ctx, &eventqueue.Message{Event: a2a.NewMessage(a2a.MessageRoleAgent, a2a.NewTextPart("x"))}); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatalf("a reader of a live queue got %v", err)
	}
	_ = r2.Close()
	if err := m.Destroy(ctx, id); err != nil {
		t.Fatal(err)
	}
}

// openQueue makes a manager and a task's queue with its writer and a first reader.
func openQueue(t *testing.T) (*Manager, a2a.TaskID, eventqueue.Writer, eventqueue.Reader) {
	t.Helper()
	ctx := context.Background()
	m := New()
	id := a2a.NewTaskID()
	w, err := m.CreateWriter(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	r, err := m.CreateReader(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	return m, id, w, r
}
