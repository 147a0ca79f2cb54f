package web

import (
	"context"
	"sync"

	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Changes tells open pages that the hub's caches changed. A page that is told re-reads its part from
// the hub, which reads its caches: no API server is asked.
type Changes struct {
	mu   sync.Mutex
	subs map[chan struct{}]struct{}
}

// MaxSubscribers bounds the pages listening at once; more are refused rather than let grow without end.
const MaxSubscribers = 256

// Notify tells every subscriber; one that has not taken the last notice yet is not told twice.
func (c *Changes) Notify() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for ch := range c.subs {
		select {
		case ch <- struct{}{}:
		default:
		}
	}
}

// Listening says whether any page listens.
func (c *Changes) Listening() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.subs) > 0
}

// Subscribe returns a channel that receives a notice after changes, and the function that ends the
// subscription; ok is false when MaxSubscribers listen already.
func (c *Changes) Subscribe() (notices <-chan struct{}, cancel func(), ok bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.subs == nil {
		c.subs = map[chan struct{}]struct{}{}
	}
	if len(c.subs) >= MaxSubscribers {
		return nil, nil, false
	}
	ch := make(chan struct{}, 1)
	c.subs[ch] = struct{}{}
	return ch, func() {
		c.mu.Lock()
		defer c.mu.Unlock()
		delete(c.subs, ch)
	}, true
}

// Watch notifies c of every add, update and delete the cache sees of the kinds the page shows.
func Watch(ctx context.Context, informers cache.Informers, c *Changes, kinds ...client.Object) error {
	notify := func(any) { c.Notify() }
	handler := toolscache.ResourceEventHandlerFuncs{
		AddFunc: notify, DeleteFunc: notify,
		UpdateFunc: func(any, any) { c.Notify() },
	}
	for _, kind := range kinds {
		inf, err := informers.GetInformer(ctx, kind)
		if err != nil {
			return err
		}
		if _, err := inf.AddEventHandler(handler); err != nil {
			return err
		}
	}
	return nil
}
