package expectations

import (
	"fmt"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"
)

func TestExpectations(t *testing.T) {
	clk := clocktesting.NewFakePassiveClock(time.Unix(1000, 0))
	e := NewCreated(clk)

	if _, ok := e.Pending("a"); ok {
		t.Fatal("a write never made is pending")
	}
	e.Expect("a")
	if wait, ok := e.Pending("a"); !ok || wait != ExpectationTimeout {
		t.Fatalf("pending(a) = %v, %v; want %v, true", wait, ok, ExpectationTimeout)
	}
	clk.SetTime(clk.Now().Add(ExpectationTimeout - time.Second))
	if wait, ok := e.Pending("a"); !ok || wait != time.Second {
		t.Fatalf("pending(a) = %v, %v; want 1s, true", wait, ok)
	}
	e.Observe("a")
	if _, ok := e.Pending("a"); ok {
		t.Fatal("an observed write is still pending")
	}

	e.Expect("b")
	clk.SetTime(clk.Now().Add(ExpectationTimeout))
	if _, ok := e.Pending("b"); ok {
		t.Fatal("a lapsed write is still pending")
	}
	if len(e.until) != 0 {
		t.Fatalf("lapsed expectation kept: %v", e.until)
	}
}

func TestExpectationsDropLapsedOnes(t *testing.T) {
	clk := clocktesting.NewFakePassiveClock(time.Unix(1000, 0))
	e := NewCreated(clk)
	for i := range sweepAbove {
		e.Expect(fmt.Sprint(i)) // never observed: their objects went away unseen
	}
	clk.SetTime(clk.Now().Add(ExpectationTimeout))
	e.Expect("fresh")
	if len(e.until) != 1 {
		t.Fatalf("%d expectations kept, want only the fresh one", len(e.until))
	}
	if _, ok := e.Pending("fresh"); !ok {
		t.Fatal("the fresh expectation was dropped")
	}
}
