package memworker

import (
	"context"
	"encoding/json"
	"errors"
	"reflect"
	"strconv"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	utiljson "k8s.io/apimachinery/pkg/util/json"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
)

// localClient reads and writes a server's store in process, with the semantics its API has (versions,
// conflicts, status subresources), for the agent: no HTTP, no encoding but JSON.
type localClient struct {
	store  *store
	scheme *runtime.Scheme
	mapper meta.RESTMapper
	writes *writeCounter
	client string // who the writes are counted as
}

var _ client.Client = (*localClient)(nil)

var errUnsupported = errors.New("not supported by the in-memory worker")

func newLocalClient(s *store, scheme *runtime.Scheme, writes *writeCounter, who string) *localClient {
	mapper := meta.NewDefaultRESTMapper(nil)
	for _, r := range served {
		scope := meta.RESTScopeRoot
		if r.namespaced {
			scope = meta.RESTScopeNamespace
		}
		mapper.Add(r.groupVersionKind(), scope)
	}
	return &localClient{store: s, scheme: scheme, mapper: mapper, writes: writes, client: who}
}

func (c *localClient) resourceOf(obj runtime.Object) (*resource, error) {
	gvk, err := apiutil.GVKForObject(obj, c.scheme)
	if err != nil {
		return nil, err
	}
	gvk.Kind = strings.TrimSuffix(gvk.Kind, "List")
	res := byKind(gvk)
	if res == nil {
		return nil, &meta.NoKindMatchError{GroupKind: gvk.GroupKind(), SearchedVersions: []string{gvk.Version}}
	}
	return res, nil
}

// decodeInto fills obj from JSON alone, as a client's decoder does: obj is zeroed first.
func decodeInto(raw []byte, obj runtime.Object) error {
	v := reflect.ValueOf(obj).Elem()
	v.Set(reflect.Zero(v.Type()))
	return json.Unmarshal(raw, obj)
}

func toUnstructured(obj runtime.Object) (*unstructured.Unstructured, error) {
	raw, err := json.Marshal(obj)
	if err != nil {
		return nil, err
	}
	u := &unstructured.Unstructured{}
	return u, utiljson.Unmarshal(raw, &u.Object)
}

// typed is a stored object as the scheme's type of its kind, shared unless copied: a cache's reader
// hands out its objects the same way.
func (c *localClient) typed(res *resource, o *object, share bool) (runtime.Object, error) {
	t, err := o.decodedAs(func() (runtime.Object, error) { return c.scheme.New(res.groupVersionKind()) })
	if err != nil || share {
		return t, err
	}
	return t.DeepCopyObject(), nil
}

func (c *localClient) Get(_ context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	res, err := c.resourceOf(obj)
	if err != nil {
		return err
	}
	o, err := c.store.get(res, key.Namespace, key.Name)
	if err != nil {
		return err
	}
	t, err := c.typed(res, o, ptr.Deref((&client.GetOptions{}).ApplyOptions(opts).UnsafeDisableDeepCopy, false))
	if err != nil {
		return err
	}
	out := reflect.ValueOf(obj).Elem()
	if in := reflect.ValueOf(t).Elem(); in.Type() == out.Type() {
		out.Set(in)
		return nil
	}
	return decodeInto(o.raw, obj) // another type than the scheme's, unstructured say
}

func (c *localClient) List(_ context.Context, list client.ObjectList, opts ...client.ListOption) error {
	res, err := c.resourceOf(list)
	if err != nil {
		return err
	}
	lo := (&client.ListOptions{}).ApplyOptions(opts)
	sel, err := selects(lo.LabelSelector, lo.FieldSelector)
	if err != nil {
		return err
	}
	objs, rv := c.store.list(res, lo.Namespace, sel)
	items := make([]runtime.Object, 0, len(objs))
	for _, o := range objs {
		t, err := c.typed(res, o, ptr.Deref(lo.UnsafeDisableDeepCopy, false))
		if err != nil {
			return err
		}
		items = append(items, t)
	}
	if err := meta.SetList(list, items); err != nil {
		return decodeInto(encodeList(res, objs, rv), list) // another list type than the scheme's
	}
	list.SetResourceVersion(strconv.FormatUint(rv, 10))
	return nil
}

// write counts one write and carries it out on the object's stored form.
func (c *localClient) write(obj client.Object, verb, sub string, do func(*resource, *unstructured.Unstructured) (*object, error)) error {
	res, err := c.resourceOf(obj)
	if err != nil {
		return err
	}
	u, err := toUnstructured(obj)
	if err != nil {
		return err
	}
	resource := res.name
	if sub != "" {
		resource += "/" + sub
	}
	c.writes.add(c.client, verb, resource)
	o, err := do(res, u)
	if err != nil {
		return err
	}
	return decodeInto(o.raw, obj)
}

func (c *localClient) Create(_ context.Context, obj client.Object, _ ...client.CreateOption) error {
	return c.write(obj, "create", "", func(res *resource, u *unstructured.Unstructured) (*object, error) {
		return c.store.create(res, obj.GetNamespace(), u)
	})
}

func (c *localClient) Update(_ context.Context, obj client.Object, _ ...client.UpdateOption) error {
	return c.update(obj, "")
}

func (c *localClient) update(obj client.Object, sub string) error {
	return c.write(obj, "update", sub, func(res *resource, u *unstructured.Unstructured) (*object, error) {
		return c.store.update(res, obj.GetNamespace(), obj.GetName(), sub, u)
	})
}

func (c *localClient) Patch(_ context.Context, obj client.Object, patch client.Patch, _ ...client.PatchOption) error {
	return c.patch(obj, patch, "")
}

func (c *localClient) patch(obj client.Object, patch client.Patch, sub string) error {
	if patch.Type() != types.MergePatchType {
		return unsupportedMediaType(string(patch.Type()))
	}
	data, err := patch.Data(obj)
	if err != nil {
		return err
	}
	return c.write(obj, "patch", sub, func(res *resource, _ *unstructured.Unstructured) (*object, error) {
		return c.store.patch(res, obj.GetNamespace(), obj.GetName(), sub, data)
	})
}

func (c *localClient) Delete(_ context.Context, obj client.Object, opts ...client.DeleteOption) error {
	do := (&client.DeleteOptions{}).ApplyOptions(opts)
	return c.write(obj, "delete", "", func(res *resource, _ *unstructured.Unstructured) (*object, error) {
		return c.store.delete(res, obj.GetNamespace(), obj.GetName(), do.AsDeleteOptions())
	})
}

func (c *localClient) DeleteAllOf(context.Context, client.Object, ...client.DeleteAllOfOption) error {
	return errUnsupported
}

func (c *localClient) Apply(context.Context, runtime.ApplyConfiguration, ...client.ApplyOption) error {
	return errUnsupported
}

func (c *localClient) Status() client.SubResourceWriter { return c.SubResource("status") }

func (c *localClient) SubResource(sub string) client.SubResourceClient {
	return &localSubResource{c: c, sub: sub}
}

func (c *localClient) Scheme() *runtime.Scheme { return c.scheme }

func (c *localClient) RESTMapper() meta.RESTMapper { return c.mapper }

func (c *localClient) GroupVersionKindFor(obj runtime.Object) (schema.GroupVersionKind, error) {
	return apiutil.GVKForObject(obj, c.scheme)
}

func (c *localClient) IsObjectNamespaced(obj runtime.Object) (bool, error) {
	res, err := c.resourceOf(obj)
	if err != nil {
		return false, err
	}
	return res.namespaced, nil
}

// localSubResource writes the status of objects; the server has no other subresource.
type localSubResource struct {
	c   *localClient
	sub string
}

func (s *localSubResource) check(obj client.Object) error {
	res, err := s.c.resourceOf(obj)
	if err != nil {
		return err
	}
	if s.sub != "status" || !res.status {
		return apierrors.NewNotFound(res.groupResource(), obj.GetName()+"/"+s.sub)
	}
	return nil
}

func (s *localSubResource) Get(context.Context, client.Object, client.Object, ...client.SubResourceGetOption) error {
	return errUnsupported
}

func (s *localSubResource) Create(context.Context, client.Object, client.Object, ...client.SubResourceCreateOption) error {
	return errUnsupported
}

func (s *localSubResource) Update(_ context.Context, obj client.Object, _ ...client.SubResourceUpdateOption) error {
	if err := s.check(obj); err != nil {
		return err
	}
	return s.c.update(obj, s.sub)
}

func (s *localSubResource) Patch(_ context.Context, obj client.Object, patch client.Patch, _ ...client.SubResourcePatchOption) error {
	if err := s.check(obj); err != nil {
		return err
	}
	return s.c.patch(obj, patch, s.sub)
}

func (s *localSubResource) Apply(context.Context, runtime.ApplyConfiguration, ...client.SubResourceApplyOption) error {
	return errUnsupported
}
