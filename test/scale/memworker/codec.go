package memworker

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer/protobuf"
	utiljson "k8s.io/apimachinery/pkg/util/json"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
)

// protobufDecoder reads the bodies controller-runtime's clients send for Kubernetes' own kinds.
var protobufDecoder = protobuf.NewSerializer(clientgoscheme.Scheme, clientgoscheme.Scheme)

// maxBody is the largest request body read, as the API server's limit.
const maxBody = 3 << 20

// encodeList is the list of a resource as the API answers it.
func encodeList(res *resource, objs []*object, rv uint64) []byte {
	var b bytes.Buffer
	fmt.Fprintf(&b, `{"apiVersion":%q,"kind":%q,"metadata":{"resourceVersion":"%d"},"items":[`, res.apiVersion(), res.kind+"List", rv)
	for i, o := range objs {
		if i > 0 {
			b.WriteByte(',')
		}
		b.Write(o.raw)
	}
	b.WriteString("]}")
	return b.Bytes()
}

// acceptsPlainJSON says whether the client takes plain JSON. Discovery clients that prefer the
// aggregated form (application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList) list plain
// JSON after it, and read what the response's type says.
func acceptsPlainJSON(r *http.Request) bool {
	accept := r.Header.Get("Accept")
	if accept == "" {
		return true
	}
	for _, part := range strings.Split(accept, ",") {
		mt, params, err := mime.ParseMediaType(strings.TrimSpace(part))
		if err == nil && (mt == "*/*" || mt == "application/*" || (mt == runtime.ContentTypeJSON && params["as"] == "")) {
			return true
		}
	}
	return false
}

func readBody(r *http.Request) ([]byte, error) {
	b, err := io.ReadAll(io.LimitReader(r.Body, maxBody+1))
	switch {
	case err != nil:
		return nil, apierrors.NewBadRequest(err.Error())
	case len(b) > maxBody:
		return nil, apierrors.NewRequestEntityTooLargeError(fmt.Sprintf("limit is %d", maxBody))
	}
	return b, nil
}

func mediaType(r *http.Request) string {
	mt, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type"))
	return mt
}

// decodeTyped reads a JSON or protobuf body into a typed object.
func decodeTyped(body []byte, mt string, into runtime.Object) error {
	var err error
	switch mt {
	case "", runtime.ContentTypeJSON:
		err = json.Unmarshal(body, into)
	case runtime.ContentTypeProtobuf:
		_, _, err = protobufDecoder.Decode(body, nil, into)
	default:
		return unsupportedMediaType(mt)
	}
	if err != nil {
		return apierrors.NewBadRequest("the body does not decode: " + err.Error())
	}
	return nil
}

// decodeObject reads the object of a create or an update, JSON or, for Kubernetes' own kinds, protobuf.
func decodeObject(r *http.Request, res *resource) (*unstructured.Unstructured, error) {
	body, err := readBody(r)
	if err != nil {
		return nil, err
	}
	switch mt := mediaType(r); mt {
	case "", runtime.ContentTypeJSON:
	case runtime.ContentTypeProtobuf:
		typed, err := clientgoscheme.Scheme.New(res.groupVersionKind())
		if err != nil {
			return nil, unsupportedMediaType(mt + " for " + res.kind)
		}
		if err := decodeTyped(body, mt, typed); err != nil {
			return nil, err
		}
		if body, err = json.Marshal(typed); err != nil {
			return nil, apierrors.NewInternalError(err)
		}
	default:
		return nil, unsupportedMediaType(mt)
	}
	u := &unstructured.Unstructured{}
	if err := utiljson.Unmarshal(body, &u.Object); err != nil || u.Object == nil {
		return nil, apierrors.NewBadRequest(fmt.Sprintf("the body is not a JSON object: %v", err))
	}
	return u, nil
}

func decodeDeleteOptions(r *http.Request) (*metav1.DeleteOptions, error) {
	opts := &metav1.DeleteOptions{}
	body, err := readBody(r)
	if err != nil || len(body) == 0 {
		return opts, err
	}
	return opts, decodeTyped(body, mediaType(r), opts)
}

func unsupportedMediaType(mt string) error {
	return &apierrors.StatusError{ErrStatus: metav1.Status{Status: metav1.StatusFailure, Code: http.StatusUnsupportedMediaType,
		Reason: metav1.StatusReasonUnsupportedMediaType, Message: "unsupported media type " + mt}}
}

// statusOf is an error as the API's Status object, which client-go's apierrors functions read.
func statusOf(err error) *metav1.Status {
	var se apierrors.APIStatus
	if !errors.As(err, &se) {
		se = apierrors.NewInternalError(err)
	}
	st := se.Status()
	st.TypeMeta = metav1.TypeMeta{Kind: "Status", APIVersion: "v1"}
	if st.Code == 0 {
		st.Code = http.StatusInternalServerError
	}
	return &st
}

func statusJSON(err error) []byte {
	raw, mErr := json.Marshal(statusOf(err))
	if mErr != nil {
		panic(mErr) // a Status always encodes
	}
	return raw
}

func writeError(w http.ResponseWriter, err error) {
	st := statusOf(err)
	writeJSON(w, int(st.Code), st)
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	raw, err := json.Marshal(v)
	if err != nil {
		writeError(w, apierrors.NewInternalError(err))
		return
	}
	writeRaw(w, code, raw)
}

func writeRaw(w http.ResponseWriter, code int, raw []byte) {
	w.Header().Set("Content-Type", runtime.ContentTypeJSON)
	w.WriteHeader(code)
	_, _ = w.Write(raw)
}
