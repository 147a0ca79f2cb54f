package e2e

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"

	visibility "github.com/gantry-dev/gantry/apis/visibility/v1beta1"
)

// visibilityGet asks the hub's endpoint for a path of the visibility API with the bearer token.
func visibilityGet(t *testing.T, token, path string) (int, visibility.PendingWorkloadList) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, logsEndpoint(t)+"/apis/visibility.gantry.dev/v1beta1/"+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var list visibility.PendingWorkloadList
	if resp.StatusCode == http.StatusOK {
		if err := json.NewDecoder(resp.Body).Decode(&list); err != nil {
			t.Fatal(err)
		}
	}
	return resp.StatusCode, list
}

// A tenant's ServiceAccount, allowed to list Workloads in its own namespace only, reads through the
// hub's endpoint what waits there, with the positions the dispatcher will take it in, and nothing of
// another namespace or of the GlobalQueue as a whole.
func TestATenantReadsItsPositionsThroughTheHub(t *testing.T) {
	ns, other := newNamespace(t, "positions"), newNamespace(t, "positions-other")
	dumpOnFailure(t, ns)
	ownQueueOn(t, ns, "worker-1", 1)
	running := makeJob(ns, "running").gpus(1).runsFor("60s").obj()
	submit(t, running)
	eventually(t, "the first job admitted", time.Minute, poll, func() error {
		_, err := winnerOf(running)
		return err
	})
	for i := range 3 {
		submit(t, makeJob(ns, fmt.Sprintf("waits-%d", i)).gpus(1).runsFor("5s").obj())
		time.Sleep(1100 * time.Millisecond) // creation times a second apart: their order is theirs
	}
	token := tokenWithRules(t, ns, "tenant", false,
		rbacv1.PolicyRule{APIGroups: []string{"gantry.dev"}, Resources: []string{"workloads"}, Verbs: []string{"list"}})

	eventually(t, "the tenant's three jobs in order", time.Minute, poll, func() error {
		code, list := visibilityGet(t, token, "namespaces/"+ns+"/pendingworkloads")
		if code != http.StatusOK {
			return fmt.Errorf("status %d", code)
		}
		var got []string
		for _, w := range list.Items {
			got = append(got, fmt.Sprintf("%s@%d/%d", w.Name, w.PositionInGlobalQueue, w.PositionInQueue))
		}
		if want := "job-waits-0@1/1 job-waits-1@2/2 job-waits-2@3/3"; strings.Join(got, " ") != want {
			return fmt.Errorf("got %v, want %s", got, want)
		}
		return nil
	})
	for path, want := range map[string]int{
		"namespaces/" + other + "/pendingworkloads": http.StatusForbidden,
		"globalqueues/" + ns + "/pendingworkloads":  http.StatusForbidden,
	} {
		if code, _ := visibilityGet(t, token, path); code != want {
			t.Errorf("%s: %d, want %d", path, code, want)
		}
	}
	if code, _ := visibilityGet(t, "not-a-token", "namespaces/"+ns+"/pendingworkloads"); code != http.StatusUnauthorized {
		t.Errorf("without a valid token: %d, want 401", code)
	}
}
