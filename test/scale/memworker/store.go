package memworker

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"sort"
	"strconv"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	utiljson "k8s.io/apimachinery/pkg/util/json"
	utilrand "k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/apimachinery/pkg/util/uuid"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/apimachinery/pkg/watch"
)

// object is one stored object. It never changes: a write stores a new one.
type object struct {
	raw             []byte // the JSON the server answers with
	namespace, name string
	uid             string
	rv              uint64
	labels          map[string]string

	// typed is raw decoded once for the in-process agent, whose passes read every copy again and again.
	typedOnce sync.Once
	typed     runtime.Object
	typedErr  error
}

// decodedAs is the object as a typed one, decoded on the first call; callers must not change it.
func (o *object) decodedAs(newObject func() (runtime.Object, error)) (runtime.Object, error) {
	o.typedOnce.Do(func() {
		if o.typed, o.typedErr = newObject(); o.typedErr == nil {
			o.typedErr = json.Unmarshal(o.raw, o.typed)
		}
	})
	return o.typed, o.typedErr
}

func newObject(u *unstructured.Unstructured) (*object, error) {
	raw, err := json.Marshal(u.Object)
	if err != nil {
		return nil, err
	}
	rv, _ := strconv.ParseUint(u.GetResourceVersion(), 10, 64)
	return &object{raw: raw, namespace: u.GetNamespace(), name: u.GetName(), uid: string(u.GetUID()), rv: rv, labels: u.GetLabels()}, nil
}

func (o *object) decode() *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	if err := utiljson.Unmarshal(o.raw, &u.Object); err != nil {
		panic(fmt.Sprintf("stored object %s/%s does not decode: %v", o.namespace, o.name, err)) // the store wrote it
	}
	return u
}

// event is one change, as the event log keeps it and watches and listeners receive it.
type event struct {
	typ watch.EventType
	res *resource
	// obj is the object after the change; for a deletion, the object as deleted, with the deletion's
	// version. prev is the object before the change; nil for a creation.
	obj, prev *object
}

// store holds one server's objects. Every write takes the next version of one counter, as etcd's
// revision, so a version orders all changes of the server.
type store struct {
	mu        sync.Mutex
	rv        uint64
	objects   map[*resource]map[string]*object
	log       eventLog
	watchers  map[*watcher]struct{}
	listeners []func(event)
	now       func() time.Time
	// expired counts the watches refused for a version whose changes are gone.
	expired int
}

func newStore(logSize int) *store {
	s := &store{objects: map[*resource]map[string]*object{}, log: eventLog{limit: logSize}, watchers: map[*watcher]struct{}{}, now: time.Now}
	for _, r := range served {
		s.objects[r] = map[string]*object{}
	}
	return s
}

func objectKey(namespace, name string) string { return namespace + "/" + name }

// listen calls f, under the store's lock, for every change from now on: f must not block.
func (s *store) listen(f func(event)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.listeners = append(s.listeners, f)
}

func (s *store) get(res *resource, namespace, name string) (*object, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.current(res, namespace, name)
}

func (s *store) current(res *resource, namespace, name string) (*object, error) {
	if o, ok := s.objects[res][objectKey(namespace, name)]; ok {
		return o, nil
	}
	return nil, apierrors.NewNotFound(res.groupResource(), name)
}

// list returns the objects of the namespace (all when empty) that sel selects, in key order, and the
// version the list is at.
func (s *store) list(res *resource, namespace string, sel func(*object) bool) ([]*object, uint64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.listLocked(res, namespace, sel), s.rv
}

func (s *store) listLocked(res *resource, namespace string, sel func(*object) bool) []*object {
	var out []*object
	for _, o := range s.objects[res] {
		if (namespace == "" || o.namespace == namespace) && sel(o) {
			out = append(out, o)
		}
	}
	sort.Slice(out, func(i, j int) bool {
		return objectKey(out[i].namespace, out[i].name) < objectKey(out[j].namespace, out[j].name)
	})
	return out
}

// create stores a new object, as the request for the namespace sent it.
func (s *store) create(res *resource, namespace string, u *unstructured.Unstructured) (*object, error) {
	if err := matchesRequest(res, namespace, "", u); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.createLocked(res, namespace, u)
}

func (s *store) createLocked(res *resource, namespace string, u *unstructured.Unstructured) (*object, error) {
	if err := s.namespaceExists(res, namespace); err != nil {
		return nil, err
	}
	if u.GetName() == "" && u.GetGenerateName() != "" {
		u.SetName(u.GetGenerateName() + utilrand.String(5))
	}
	if u.GetName() == "" {
		return nil, apierrors.NewInvalid(res.groupVersionKind().GroupKind(), "",
			field.ErrorList{field.Required(field.NewPath("metadata", "name"), "name or generateName is required")})
	}
	key := objectKey(u.GetNamespace(), u.GetName())
	if _, exists := s.objects[res][key]; exists {
		return nil, apierrors.NewAlreadyExists(res.groupResource(), u.GetName())
	}
	s.rv++
	initialize(res, u, s.rv, s.now())
	o, err := newObject(u)
	if err != nil {
		return nil, apierrors.NewInternalError(err)
	}
	s.objects[res][key] = o
	s.record(event{typ: watch.Added, res: res, obj: o})
	return o, nil
}

// matchesRequest fills in the request's namespace and refuses a body that names another namespace or
// object than the path.
func matchesRequest(res *resource, namespace, name string, u *unstructured.Unstructured) error {
	switch {
	case !res.namespaced:
		u.SetNamespace("")
	case u.GetNamespace() == "":
		u.SetNamespace(namespace)
	case u.GetNamespace() != namespace:
		return apierrors.NewBadRequest("the namespace of the provided object does not match the namespace sent on the request")
	}
	if name != "" && u.GetName() != name {
		return apierrors.NewBadRequest(fmt.Sprintf("the name of the object (%s) does not match the name on the URL (%s)", u.GetName(), name))
	}
	return nil
}

// namespaceExists refuses an object of a namespace that does not exist, as the API server's
// NamespaceLifecycle admission does: the hub creates the namespace when it meets this.
func (s *store) namespaceExists(res *resource, namespace string) error {
	if !res.namespaced {
		return nil
	}
	if namespace == "" {
		return apierrors.NewBadRequest("a namespaced object needs a namespace")
	}
	if _, ok := s.objects[namespaces][objectKey("", namespace)]; !ok {
		return apierrors.NewNotFound(namespaces.groupResource(), namespace)
	}
	return nil
}

var namespaces = lookup("", "v1", "namespaces")

// initialize sets what the server owns on a new object.
func initialize(res *resource, u *unstructured.Unstructured, rv uint64, now time.Time) {
	u.SetAPIVersion(res.apiVersion())
	u.SetKind(res.kind)
	u.SetUID(uuid.NewUUID())
	u.SetResourceVersion(strconv.FormatUint(rv, 10))
	u.SetCreationTimestamp(metav1.NewTime(now))
	u.SetGeneration(1)
	u.SetDeletionTimestamp(nil)
	u.SetDeletionGracePeriodSeconds(nil)
	u.SetManagedFields(nil)
	if res.status && !res.statusOnCreate {
		delete(u.Object, "status")
	}
	if res == namespaces {
		u.Object["status"] = map[string]any{"phase": "Active"}
	}
}

// update replaces an object, or with sub "status" its status only.
func (s *store) update(res *resource, namespace, name, sub string, u *unstructured.Unstructured) (*object, error) {
	if err := matchesRequest(res, namespace, name, u); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	cur, err := s.current(res, namespace, name)
	if err != nil {
		return nil, err
	}
	if err := preconditions(res, cur, u.GetResourceVersion(), string(u.GetUID())); err != nil {
		return nil, err
	}
	return s.replace(res, cur, merged(res, cur.decode(), u, sub))
}

// patch applies a JSON merge patch (RFC 7386) to an object, or with sub "status" to its status only.
// A resourceVersion or uid the patch sets must be the stored one's.
func (s *store) patch(res *resource, namespace, name, sub string, patch []byte) (*object, error) {
	var p map[string]any
	if err := utiljson.Unmarshal(patch, &p); err != nil || p == nil {
		return nil, apierrors.NewBadRequest(fmt.Sprintf("the patch is not a JSON object: %v", err))
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	cur, err := s.current(res, namespace, name)
	if err != nil {
		return nil, err
	}
	stored := cur.decode()
	patched := &unstructured.Unstructured{Object: mergePatch(stored.Object, p)}
	if err := preconditions(res, cur, patched.GetResourceVersion(), string(patched.GetUID())); err != nil {
		return nil, err
	}
	return s.replace(res, cur, merged(res, stored, patched, sub))
}

// mergePatch applies patch to doc, changing neither: null removes a field, an object merges into an
// object, anything else replaces.
func mergePatch(doc, patch map[string]any) map[string]any {
	out := make(map[string]any, len(doc)+len(patch))
	for k, v := range doc {
		out[k] = v
	}
	for k, pv := range patch {
		pm, isObject := pv.(map[string]any)
		switch {
		case pv == nil:
			delete(out, k)
		case isObject:
			dm, _ := out[k].(map[string]any)
			out[k] = mergePatch(dm, pm)
		default:
			out[k] = pv
		}
	}
	return out
}

// preconditions refuses a write that names another version or object than the stored one.
func preconditions(res *resource, cur *object, rv, uid string) error {
	if uid != "" && uid != cur.uid {
		return apierrors.NewConflict(res.groupResource(), cur.name,
			fmt.Errorf("Precondition failed: UID in precondition: %s, UID in object meta: %s", uid, cur.uid))
	}
	if rv != "" && rv != strconv.FormatUint(cur.rv, 10) {
		return apierrors.NewConflict(res.groupResource(), cur.name,
			errors.New("the object has been modified; please apply your changes to the latest version and try again"))
	}
	return nil
}

// merged is the object a write leaves: of a status write, the stored object with the new status; of
// any other, the new object with the stored status and the metadata the server owns, its generation
// counting changes of anything but metadata and status.
func merged(res *resource, stored, in *unstructured.Unstructured, sub string) *unstructured.Unstructured {
	if sub == "status" {
		next := stored.DeepCopy()
		setOrRemove(next.Object, "status", in.Object["status"])
		return next
	}
	next := in.DeepCopy()
	next.SetAPIVersion(res.apiVersion())
	next.SetKind(res.kind)
	next.SetNamespace(stored.GetNamespace())
	next.SetName(stored.GetName())
	next.SetUID(stored.GetUID())
	next.SetCreationTimestamp(stored.GetCreationTimestamp())
	next.SetDeletionTimestamp(stored.GetDeletionTimestamp())
	next.SetDeletionGracePeriodSeconds(stored.GetDeletionGracePeriodSeconds())
	next.SetManagedFields(nil)
	if res.status {
		setOrRemove(next.Object, "status", stored.Object["status"])
	}
	next.SetGeneration(stored.GetGeneration())
	if !reflect.DeepEqual(specOf(stored), specOf(next)) {
		next.SetGeneration(stored.GetGeneration() + 1)
	}
	return next
}

func setOrRemove(m map[string]any, key string, v any) {
	if v == nil {
		delete(m, key)
		return
	}
	m[key] = v
}

// specOf is everything of an object that its generation counts.
func specOf(u *unstructured.Unstructured) map[string]any {
	out := make(map[string]any, len(u.Object))
	for k, v := range u.Object {
		if k != "metadata" && k != "status" {
			out[k] = v
		}
	}
	return out
}

// replace stores next in place of cur. A write that changes nothing is no write: no new version, no
// event. An object being deleted goes once its last finalizer is removed.
func (s *store) replace(res *resource, cur *object, next *unstructured.Unstructured) (*object, error) {
	if next.GetDeletionTimestamp() != nil && len(next.GetFinalizers()) == 0 {
		return s.remove(res, cur), nil
	}
	next.SetResourceVersion(strconv.FormatUint(cur.rv, 10))
	if raw, err := json.Marshal(next.Object); err == nil && bytes.Equal(raw, cur.raw) {
		return cur, nil
	}
	s.rv++
	next.SetResourceVersion(strconv.FormatUint(s.rv, 10))
	o, err := newObject(next)
	if err != nil {
		return nil, apierrors.NewInternalError(err)
	}
	s.objects[res][objectKey(cur.namespace, cur.name)] = o
	s.record(event{typ: watch.Modified, res: res, obj: o, prev: cur})
	return o, nil
}

// remove deletes cur and returns it as deleted, with the deletion's version.
func (s *store) remove(res *resource, cur *object) *object {
	s.rv++
	u := cur.decode()
	u.SetResourceVersion(strconv.FormatUint(s.rv, 10))
	gone, err := newObject(u)
	if err != nil {
		panic(err) // it decoded from JSON
	}
	delete(s.objects[res], objectKey(cur.namespace, cur.name))
	s.record(event{typ: watch.Deleted, res: res, obj: gone, prev: cur})
	return gone
}

// delete deletes an object at once, whatever the propagation policy (nothing on these servers has
// dependents), unless it has finalizers: it is then marked deleted and goes when they are removed.
func (s *store) delete(res *resource, namespace, name string, opts *metav1.DeleteOptions) (*object, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	cur, err := s.current(res, namespace, name)
	if err != nil {
		return nil, err
	}
	if p := opts.Preconditions; p != nil {
		uid, rv := "", ""
		if p.UID != nil {
			uid = string(*p.UID)
		}
		if p.ResourceVersion != nil {
			rv = *p.ResourceVersion
		}
		if err := preconditions(res, cur, rv, uid); err != nil {
			return nil, err
		}
	}
	u := cur.decode()
	if len(u.GetFinalizers()) == 0 {
		return s.remove(res, cur), nil
	}
	if u.GetDeletionTimestamp() != nil {
		return cur, nil
	}
	now := metav1.NewTime(s.now())
	var grace int64
	u.SetDeletionTimestamp(&now)
	u.SetDeletionGracePeriodSeconds(&grace)
	return s.replace(res, cur, u)
}

// record logs a change and hands it to the watches and listeners. Called with s.mu held.
func (s *store) record(e event) {
	s.log.add(e)
	for w := range s.watchers {
		if f, ok := w.frameOf(e); ok && !w.send(f) {
			s.drop(w) // too slow: it resumes from its last version, as from any closed watch
		}
	}
	for _, l := range s.listeners {
		l(e)
	}
}
