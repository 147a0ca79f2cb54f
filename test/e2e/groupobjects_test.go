package e2e

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

// groupObjects records the creations of the objects of some API groups (the CRDs of KubeRay, the trainer,
// JobSet) in one namespace in each worker's etcd, from the moment it starts: an object created and
// deleted again before anyone listed it is recorded too. The API servers keep such an object under
// /registry/<group>/<resource>/<namespace>/<name>.
type groupObjects struct {
	ns      string
	mu      sync.Mutex
	made    map[string][]string // resource/name -> the clusters it was created on, once per creation
	synced  map[string]int64    // per cluster and group: highest revision its watch delivered
	errs    []error
	clients map[string]*clientv3.Client
	groups  []string
}

// watchObjects starts watching each worker's etcd for the objects of the groups; the test's cleanup stops it.
func watchObjects(t *testing.T, ns string, groups ...string) *groupObjects {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	h := &groupObjects{ns: ns, made: map[string][]string{}, synced: map[string]int64{}, clients: map[string]*clientv3.Client{}, groups: groups}
	var wg sync.WaitGroup
	t.Cleanup(func() {
		cancel()
		for _, cli := range h.clients {
			_ = cli.Close()
		}
		wg.Wait()
	})
	for _, w := range tb.Workers {
		cli, err := clientv3.New(clientv3.Config{Endpoints: []string{w.EtcdURL}, DialTimeout: 10 * time.Second, Logger: zap.NewNop()})
		if err != nil {
			t.Fatalf("connecting to the etcd of %s: %v", w.Name, err)
		}
		h.clients[w.Name] = cli
		rev, err := revision(ctx, cli)
		if err != nil {
			t.Fatalf("the etcd of %s: %v", w.Name, err)
		}
		for _, g := range groups {
			h.synced[w.Name+" "+g] = rev
			ch := cli.Watch(ctx, groupPrefix(g), clientv3.WithPrefix(), clientv3.WithRev(rev+1))
			wg.Add(1)
			go func(cluster, group string) {
				defer wg.Done()
				h.record(cluster, group, ch)
			}(w.Name, g)
		}
	}
	return h
}

func groupPrefix(group string) string { return "/registry/" + group + "/" }

// revision is the etcd store's current revision.
func revision(ctx context.Context, cli *clientv3.Client) (int64, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	resp, err := cli.Get(ctx, "/registry/namespaces/default")
	if err != nil {
		return 0, err
	}
	return resp.Header.Revision, nil
}

func (h *groupObjects) record(cluster, group string, ch clientv3.WatchChan) {
	for resp := range ch {
		h.mu.Lock()
		if err := resp.Err(); err != nil {
			h.errs = append(h.errs, fmt.Errorf("watching the etcd of %s: %w", cluster, err))
			h.mu.Unlock()
			return
		}
		for _, ev := range resp.Events {
			parts := strings.Split(strings.TrimPrefix(string(ev.Kv.Key), groupPrefix(group)), "/")
			if len(parts) == 3 && parts[1] == h.ns && ev.Type == clientv3.EventTypePut && ev.Kv.CreateRevision == ev.Kv.ModRevision {
				h.made[parts[0]+"/"+parts[2]] = append(h.made[parts[0]+"/"+parts[2]], cluster)
			}
		}
		key := cluster + " " + group
		h.synced[key] = max(h.synced[key], resp.Header.Revision)
		h.mu.Unlock()
	}
}

// created waits until each watch delivered everything its etcd holds now and returns the creations.
func (h *groupObjects) created(t *testing.T) map[string][]string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for name, cli := range h.clients {
		rev, err := revision(ctx, cli)
		if err != nil {
			t.Fatalf("the etcd of %s: %v", name, err)
		}
		for !h.reached(name, rev) {
			// A progress notification carries the store's revision even when no watched key changed.
			if err := cli.RequestProgress(ctx); err != nil {
				t.Fatalf("requesting watch progress from the etcd of %s: %v", name, err)
			}
			select {
			case <-ctx.Done():
				t.Fatalf("the watches of the etcd of %s did not reach revision %d", name, rev)
			case <-time.After(50 * time.Millisecond):
			}
		}
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if err := errors.Join(h.errs...); err != nil {
		t.Fatal(err)
	}
	out := make(map[string][]string, len(h.made))
	for k, v := range h.made {
		out[k] = slices.Clone(v)
	}
	return out
}

// reached: every watch of the cluster delivered revision rev (or one failed).
func (h *groupObjects) reached(cluster string, rev int64) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.errs) > 0 {
		return true
	}
	for _, g := range h.groups {
		if h.synced[cluster+" "+g] < rev {
			return false
		}
	}
	return true
}

// createdOnlyOn checks that the objects expected (resource/name) were each created once, on cluster,
// and that nothing else of the watched groups was created in the namespace.
func (h *groupObjects) createdOnlyOn(t *testing.T, cluster string, expected ...string) {
	t.Helper()
	created := h.created(t)
	for obj, clusters := range created {
		if !slices.Contains(expected, obj) || !slices.Equal(clusters, []string{cluster}) {
			t.Errorf("%s created on %v; want only %v, each once on %s", obj, clusters, expected, cluster)
		}
	}
	for _, obj := range expected {
		if created[obj] == nil {
			t.Errorf("the workers' etcd never stored %s", obj)
		}
	}
}

// jobsOnlyOn checks that every Job of the namespace the ledger saw was created once, on cluster.
func jobsOnlyOn(t *testing.T, ns, cluster string) {
	t.Helper()
	for name, clusters := range auditJobs(t, ns).created {
		if !slices.Equal(clusters, []string{cluster}) {
			t.Errorf("Job %s created on %v, want once on %s", name, clusters, cluster)
		}
	}
}
