package dispatcher

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"
)

// A pass that finds every slot taken queues its tasks and goes on; a freed slot runs the most urgent
// queued task first, and tasks of one urgency in the order they came.
func TestQueuedTasksRunMostUrgentFirst(t *testing.T) {
	d := &Dispatcher{Writers: 1}
	d.init()
	ctx := context.Background()
	release := make(chan struct{})
	var mu sync.Mutex
	var ran []string
	task := func(name string) func() {
		return func() {
			mu.Lock()
			ran = append(ran, name)
			mu.Unlock()
		}
	}
	d.startInSlot(ctx, deferred, func() { <-release })
	for _, q := range []struct {
		u    urgency
		name string
	}{{deferred, "verdict-1"}, {prompt, "nomination-1"}, {urgent, "winner-1"}, {deferred, "verdict-2"}, {urgent, "winner-2"}, {prompt, "nomination-2"}} {
		d.startInSlot(ctx, q.u, task(q.name)) // returns at once though the one slot is taken
	}
	if n := d.queuedTasks(); n != 6 {
		t.Fatalf("%d tasks queued, want 6", n)
	}
	close(release)
	waitForSlots(t, d)
	want := []string{"winner-1", "winner-2", "nomination-1", "nomination-2", "verdict-1", "verdict-2"}
	if !slices.Equal(ran, want) {
		t.Fatalf("ran %v, want %v", ran, want)
	}
}

// Tasks started from many goroutines at once all run, and every slot is free after them.
func TestEveryTaskRunsAndFreesItsSlot(t *testing.T) {
	d := &Dispatcher{Writers: 3}
	d.init()
	ctx := context.Background()
	var mu sync.Mutex
	ran := 0
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 200 {
				d.startInSlot(ctx, urgency((g+i)%int(urgencies)), func() {
					mu.Lock()
					ran++
					mu.Unlock()
				})
			}
		}()
	}
	wg.Wait()
	waitForSlots(t, d)
	if ran != 1600 || len(d.writers) != 0 || d.queuedTasks() != 0 {
		t.Fatalf("ran %d of 1600; %d slots taken, %d tasks queued", ran, len(d.writers), d.queuedTasks())
	}
}

// Once the dispatcher's context ends, the tasks still queued are dropped and the slot is freed.
func TestAnEndedContextDropsQueuedTasks(t *testing.T) {
	d := &Dispatcher{Writers: 1}
	d.init()
	ctx, cancel := context.WithCancel(context.Background())
	release := make(chan struct{})
	d.startInSlot(ctx, urgent, func() { <-release })
	ran := false
	d.startInSlot(ctx, urgent, func() { ran = true })
	cancel()
	close(release)
	waitForSlots(t, d)
	if ran || d.queuedTasks() != 0 {
		t.Fatalf("ran %v, %d queued after the context ended", ran, d.queuedTasks())
	}
}

// waitForSlots waits until every slot is free, as the dispatcher's Start does when it stops.
func waitForSlots(t testing.TB, d *Dispatcher) {
	t.Helper()
	done := make(chan struct{})
	go func() {
		for range d.Writers {
			d.writers <- struct{}{}
		}
		for range d.Writers {
			<-d.writers
		}
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("slots still taken after 10 s")
	}
}
