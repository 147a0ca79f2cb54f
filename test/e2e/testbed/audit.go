package testbed

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

// JobsPrefix is where the API server stores batch Jobs in etcd: JobsPrefix + "<namespace>/<name>".
const JobsPrefix = "/registry/jobs/"

// JobRecord is the creation or deletion of one Job in one worker's etcd.
type JobRecord struct {
	Cluster   string
	Namespace string
	Name      string
	// Created is true for a write that created the key, false for a deletion.
	Created  bool
	Revision int64
	// Seen is when the watch delivered the record.
	Seen time.Time
}

// JobAudit watches the Job keys in the etcd of every worker from the moment it starts, so it records
// every Job ever created there, including Jobs deleted again before anyone listed them.
type JobAudit struct {
	mu      sync.Mutex
	records []JobRecord
	synced  map[string]int64 // highest revision each watch has delivered
	errs    []error

	clients map[string]*clientv3.Client
	cancel  context.CancelFunc
	wg      sync.WaitGroup
}

// StartJobAudit starts watching Job keys on each worker's etcd. Every Job created after it returns is
// recorded: each watch starts from the revision the store had when it was set up.
func StartJobAudit(ctx context.Context, workers []*Cluster) (*JobAudit, error) {
	wctx, cancel := context.WithCancel(context.Background())
	a := &JobAudit{synced: map[string]int64{}, clients: map[string]*clientv3.Client{}, cancel: cancel}
	for _, w := range workers {
		cli, err := clientv3.New(clientv3.Config{
			Endpoints:   []string{w.EtcdURL},
			DialTimeout: 10 * time.Second,
			Logger:      zap.NewNop(),
		})
		if err != nil {
			a.Close()
			return nil, fmt.Errorf("connecting to the etcd of %s at %s: %w", w.Name, w.EtcdURL, err)
		}
		a.clients[w.Name] = cli
		gctx, gcancel := context.WithTimeout(ctx, 10*time.Second)
		resp, err := cli.Get(gctx, JobsPrefix, clientv3.WithPrefix(), clientv3.WithCountOnly())
		gcancel()
		if err != nil {
			a.Close()
			return nil, fmt.Errorf("reading the revision of the etcd of %s: %w", w.Name, err)
		}
		start := resp.Header.Revision
		a.synced[w.Name] = start
		// Sync's progress requests reach this watch only when both use contexts with the same metadata.
		ch := cli.Watch(wctx, JobsPrefix, clientv3.WithPrefix(), clientv3.WithRev(start+1))
		a.wg.Add(1)
		go a.run(w.Name, ch)
	}
	return a, nil
}

func (a *JobAudit) run(cluster string, ch clientv3.WatchChan) {
	defer a.wg.Done()
	for resp := range ch {
		if err := resp.Err(); err != nil {
			a.mu.Lock()
			a.errs = append(a.errs, fmt.Errorf("watching jobs in the etcd of %s: %w", cluster, err))
			a.mu.Unlock()
			return
		}
		now := time.Now()
		a.mu.Lock()
		for _, ev := range resp.Events {
			ns, name, ok := splitJobKey(string(ev.Kv.Key))
			if !ok {
				continue
			}
			r := JobRecord{Cluster: cluster, Namespace: ns, Name: name, Revision: ev.Kv.ModRevision, Seen: now}
			switch {
			case ev.Type == clientv3.EventTypeDelete:
				a.records = append(a.records, r)
			case ev.Type == clientv3.EventTypePut && ev.Kv.CreateRevision == ev.Kv.ModRevision:
				// A write that created the key; updates of an existing Job are not recorded.
				r.Created = true
				a.records = append(a.records, r)
			}
		}
		if resp.Header.Revision > a.synced[cluster] {
			a.synced[cluster] = resp.Header.Revision
		}
		a.mu.Unlock()
	}
}

// splitJobKey parses JobsPrefix + "<namespace>/<name>".
func splitJobKey(key string) (namespace, name string, ok bool) {
	rest, found := strings.CutPrefix(key, JobsPrefix)
	if !found {
		return "", "", false
	}
	return strings.Cut(rest, "/")
}

// Sync waits until every watch has delivered everything each etcd holds now, so that records reflect
// at least what the API servers showed before the call.
func (a *JobAudit) Sync(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	for name, cli := range a.clients {
		resp, err := cli.Get(ctx, JobsPrefix, clientv3.WithPrefix(), clientv3.WithCountOnly())
		if err != nil {
			return fmt.Errorf("reading the revision of the etcd of %s: %w", name, err)
		}
		for {
			if err := a.Err(); err != nil {
				return err
			}
			a.mu.Lock()
			done := a.synced[name] >= resp.Header.Revision
			a.mu.Unlock()
			if done {
				break
			}
			// A progress notification carries the store's revision even when no Job changed.
			if err := cli.RequestProgress(ctx); err != nil {
				return fmt.Errorf("requesting watch progress from the etcd of %s: %w", name, err)
			}
			select {
			case <-ctx.Done():
				return fmt.Errorf("the job audit of %s did not reach revision %d: %w", name, resp.Header.Revision, ctx.Err())
			case <-time.After(50 * time.Millisecond):
			}
		}
	}
	return nil
}

// Records returns the records of Jobs in a namespace, in the order they were seen.
func (a *JobAudit) Records(namespace string) []JobRecord {
	a.mu.Lock()
	defer a.mu.Unlock()
	var out []JobRecord
	for _, r := range a.records {
		if r.Namespace == namespace {
			out = append(out, r)
		}
	}
	return out
}

// Err reports why a watch stopped, if one did.
func (a *JobAudit) Err() error {
	a.mu.Lock()
	defer a.mu.Unlock()
	return errors.Join(a.errs...)
}

// Close stops the watches.
func (a *JobAudit) Close() {
	a.cancel()
	for _, cli := range a.clients {
		_ = cli.Close()
	}
	a.wg.Wait()
}
