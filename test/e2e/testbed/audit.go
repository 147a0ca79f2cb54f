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
	User       struct {
		Username string `json:"username"`
	} `json:"user"`
	Response struct {
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

// Audit returns the writes the cluster's API server recorded whose user agent contains agent. (The
// policy records reads of Gantry's own identities too; those are left out.)
func (tb *Testbed) Audit(cluster, agent string) ([]AuditEvent, error) {
	return tb.auditEvents(cluster, agent, func(e AuditEvent) bool {
		return strings.Contains(e.UserAgent, agent) && writeVerbs[e.Verb]
	})
}

var writeVerbs = map[string]bool{"create": true, "update": true, "patch": true, "delete": true, "deletecollection": true}

// Refused returns the requests of user (a user name, or the prefix of several) that the cluster's API
// server answered 401 or 403 since then.
func (tb *Testbed) Refused(cluster, user string, since time.Time) ([]AuditEvent, error) {
	return tb.auditEvents(cluster, user, func(e AuditEvent) bool {
		return strings.HasPrefix(e.User.Username, user) && !e.Received.Before(since) &&
			(e.Response.Code == 401 || e.Response.Code == 403)
	})
}

// auditEvents decodes the lines of the audit log that contain hint and keeps those keep accepts.
func (tb *Testbed) auditEvents(cluster, hint string, keep func(AuditEvent) bool) ([]AuditEvent, error) {
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
		if !strings.Contains(string(line), hint) {
			continue
		}
		var e AuditEvent
		if err := json.Unmarshal(line, &e); err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		if keep(e) {
			events = append(events, e)
		}
	}
	return events, sc.Err()
}
