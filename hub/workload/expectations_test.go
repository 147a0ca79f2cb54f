package workload

import (
	"fmt"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"
)

func TestExpectations(t *testing.T) {
	clk := clocktesting.NewFakePassiveClock(time.Unix(1000, 0))
	e := newExpectations(clk)

	if _, ok := e.pending("a"); ok {
		t.Fatal("a write never made is pending")
	}
	e.expect("a")
	if wait, ok := e.pending("a"); !ok || wait != ExpectationTimeout {
		t.Fatalf("pending(a) = %v, %v; want %v, true", wait, ok, ExpectationTimeout)
	}
	clk.SetTime(clk.Now().Add(ExpectationTimeout - time.Second))
	if wait, ok := e.pending("a"); !ok || wait != time.Second {
		t.Fatalf("pending(a) = %v, %v; want 1s, true", wait, ok)
	}
	e.observe("a")
	if _, ok := e.pending("a"); ok {
		t.Fatal("an observed write is still pending")
	}

	e.expect("b")
	clk.SetTime(clk.Now().Add(ExpectationTimeout))
	if _, ok := e.pending("b"); ok {
		t.Fatal("a lapsed write is still pending")
	}
	if len(e.until) != 0 {
		t.Fatalf("lapsed expectation kept: %v", e.until)
	}
}

func TestExpectationsDropLapsedOnes(t *testing.T) {
	clk := clocktesting.NewFakePassiveClock(time.Unix(1000, 0))
	e := newExpectations(clk)
	for i := range sweepAbove {
		e.expect(fmt.Sprint(i)) // never observed: their objects went away unseen
	}
	clk.SetTime(clk.Now().Add(ExpectationTimeout))
	e.expect("fresh")
	if len(e.until) != 1 {
		t.Fatalf("%d expectations kept, want only the fresh one", len(e.until))
	}
	if _, ok := e.pending("fresh"); !ok {
		t.Fatal("the fresh expectation was dropped")
	}
}
