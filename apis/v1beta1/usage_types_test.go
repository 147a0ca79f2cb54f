package v1beta1

import "testing"

// Amounts are exact in millionths both ways; one the API would not accept is 0.
func TestAmountMicros(t *testing.T) {
	for a, want := range map[Amount]int64{"0": 0, "2": 2_000_000, "2.10": 2_100_000, "0.000001": 1, "12.345678": 12_345_678, "": 0, "cheap": 0, "1.2345678": 0} {
		if got := a.Micros(); got != want {
			t.Errorf("Amount(%q).Micros() = %d, want %d", a, got, want)
		}
	}
	for m, want := range map[int64]Amount{0: "0", 2_000_000: "2", 2_100_000: "2.1", 1: "0.000001", 12_345_678: "12.345678"} {
		if got := AmountOfMicros(m); got != want {
			t.Errorf("AmountOfMicros(%d) = %q, want %q", m, got, want)
		}
	}
}

// Adding entries adds their GPU-seconds and their costs, and leaves a cost unset where neither has one.
func TestUsageEntryAdd(t *testing.T) {
	e := UsageEntry{Queue: "q", GPUSeconds: 10, LostGPUSeconds: 5}
	e.Add(UsageEntry{Queue: "other", GPUSeconds: 20, BorrowedGPUSeconds: 3})
	if e != (UsageEntry{Queue: "q", GPUSeconds: 30, BorrowedGPUSeconds: 3, LostGPUSeconds: 5}) {
		t.Errorf("unpriced: %+v", e)
	}
	e.Add(UsageEntry{Cost: "1.5", LostCost: "0.25"})
	e.Add(UsageEntry{Cost: "1"})
	if e.Cost != "2.5" || e.LostCost != "0.25" {
		t.Errorf("priced: %+v", e)
	}
}
