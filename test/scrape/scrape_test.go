package scrape

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func parse(t *testing.T, text string) Families {
	t.Helper()
	f, err := Parse(strings.NewReader(text))
	if err != nil {
		t.Fatal(err)
	}
	return f
}

const before = `# TYPE apiserver_request_total counter
apiserver_request_total{verb="POST",resource="jobs",code="201"} 3
apiserver_request_total{verb="POST",resource="jobs",code="409"} 1
apiserver_request_total{verb="GET",resource="jobs",code="200"} 7
# TYPE workqueue_depth gauge
workqueue_depth{name="a"} 2
workqueue_depth{name="b"} 5
# TYPE pass_seconds histogram
pass_seconds_bucket{le="0.01"} 1
pass_seconds_bucket{le="0.1"} 2
pass_seconds_bucket{le="+Inf"} 2
pass_seconds_sum 0.06
pass_seconds_count 2
`

const after = `# TYPE pass_seconds histogram
pass_seconds_bucket{le="0.01"} 1
pass_seconds_bucket{le="0.1"} 4
pass_seconds_bucket{le="+Inf"} 6
pass_seconds_sum 4.16
pass_seconds_count 6
`

func TestSumAndBy(t *testing.T) {
	f := parse(t, before)
	for _, tc := range []struct {
		match []string
		want  float64
	}{
		{nil, 11},
		{[]string{"verb", "POST"}, 4},
		{[]string{"verb", "POST", "code", "201"}, 3},
		{[]string{"verb", ""}, 11},
		{[]string{"verb", "DELETE"}, 0},
		{[]string{"group", ""}, 0}, // a label no series has
	} {
		if got := f.Sum("apiserver_request_total", tc.match...); got != tc.want {
			t.Errorf("Sum(%v) = %v, want %v", tc.match, got, tc.want)
		}
	}
	if got := f.Sum("workqueue_depth"); got != 7 {
		t.Errorf("Sum of a gauge = %v, want 7", got)
	}
	if got := f.Sum("absent"); got != 0 {
		t.Errorf("Sum of an absent metric = %v", got)
	}
	want := map[string]float64{"201": 3, "409": 1}
	if diff := cmp.Diff(want, f.By("apiserver_request_total", "code", "verb", "POST")); diff != "" {
		t.Errorf("By code (-want +got):\n%s", diff)
	}
}

func TestHistogramSince(t *testing.T) {
	h := parse(t, after).Histogram("pass_seconds").Since(parse(t, before).Histogram("pass_seconds"))
	if h.Count != 4 || h.Mean() != time.Second+25*time.Millisecond {
		t.Errorf("since: %d observations of mean %v, want 4 of 1.025s", h.Count, h.Mean())
	}
	for _, tc := range []struct {
		q    float64
		want string
	}{
		{0.5, "<= 100.0 ms"}, // 2 of the 4 in (10 ms, 100 ms]
		{0.99, "> 100.0 ms"}, // the rest beyond the last finite bound
	} {
		if got := h.Quantile(tc.q); got != tc.want {
			t.Errorf("Quantile(%v) = %q, want %q", tc.q, got, tc.want)
		}
	}
	if got := (Histogram{}).Quantile(0.5); got != "none" {
		t.Errorf("Quantile of an empty histogram = %q", got)
	}
}

func TestChangeIsPerLabelValueAndPer(t *testing.T) {
	got := Change(map[string]float64{"a": 2, "gone": 5}, map[string]float64{"a": 8, "new": 3}, 2)
	if len(got) != 2 || got["a"] != 3 || got["new"] != 1.5 {
		t.Errorf("Change = %v, want a 3 and new 1.5", got)
	}
}
