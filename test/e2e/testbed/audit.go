package testbed

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// AuditEvent is one write an API server of the testbed recorded (hack/testbed/audit-policy.yaml).
type AuditEvent struct {
	Verb       string `json:"verb"`
	RequestURI string `json:"requestURI"`
	UserAgent  string `json:"userAgent"`
	Stage      string `json:"stage"`
	Response   struct {
		Code int `json:"code"`
	} `json:"responseStatus"`
	Received time.Time `json:"requestReceivedTimestamp"`
}

// Applied tells whether the write took effect.
func (e AuditEvent) Applied() bool {
	return e.Stage == "ResponseComplete" && e.Response.Code >= 200 && e.Response.Code < 300
}

// kwokName is the kwok cluster behind a testbed cluster name.
func kwokName(cluster string) string { return "gantry-" + cluster }

// Audit returns the writes the cluster's API server recorded whose user agent contains agent.
func (tb *Testbed) Audit(cluster, agent string) ([]AuditEvent, error) {
	path := filepath.Join(tb.Dir, "kwok", "clusters", kwokName(cluster), "logs", "audit.log")
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("the audit log of %s (is GANTRY_AUDIT set?): %w", cluster, err)
	}
	defer f.Close()
	var events []AuditEvent
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		line := sc.Bytes()
		if !strings.Contains(string(line), agent) {
			continue
		}
		var e AuditEvent
		if err := json.Unmarshal(line, &e); err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		if strings.Contains(e.UserAgent, agent) {
			events = append(events, e)
		}
	}
	return events, sc.Err()
}
