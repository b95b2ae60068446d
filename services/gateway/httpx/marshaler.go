package httpx

import (
	"encoding/json"
	"fmt"
	"io"

	"github.com/grpc-ecosystem/grpc-gateway/v2/runtime"
	"google.golang.org/genproto/googleapis/api/httpbody"
	spb "google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/crdplane/crdplane/pkg/kstatus"
)

// RawMarshaler is the grpc-gateway Marshaler for every media type: request
// bodies pass through unparsed into google.api.HttpBody, and HttpBody
// responses go out as their bytes with their own content type. Kubernetes
// content negotiation happens in KubeAPIService, not here.
type RawMarshaler struct{}

var _ runtime.Marshaler = RawMarshaler{}
var _ runtime.Delimited = RawMarshaler{}

const ContentTypeJSON = "application/json"

// ContentType is the HttpBody's content type (JSON for anything else).
func (RawMarshaler) ContentType(v any) string {
	if hb, ok := v.(*httpbody.HttpBody); ok && hb.GetContentType() != "" {
		return hb.GetContentType()
	}
	return ContentTypeJSON
}

// Marshal returns an HttpBody's data as is. A stream error chunk (which
// grpc-gateway builds once a watch has started) becomes a watch ERROR event
// carrying the Kubernetes Status; anything else is encoded as JSON.
func (RawMarshaler) Marshal(v any) ([]byte, error) {
	switch x := v.(type) {
	case *httpbody.HttpBody:
		return x.GetData(), nil
	case *spb.Status:
		return StatusJSON(kstatus.FromError(status.ErrorProto(x)), false), nil
	case map[string]proto.Message:
		if st, ok := x["error"].(*spb.Status); ok && len(x) == 1 {
			return WatchErrorFrame(status.ErrorProto(st)), nil
		}
	}
	return json.Marshal(v)
}

// Unmarshal stores data in an HttpBody target.
func (RawMarshaler) Unmarshal(data []byte, v any) error {
	return setBody(v, data)
}

// NewDecoder reads the whole request body into the HttpBody target the
// generated code passes (Decode(&req.Body), a **httpbody.HttpBody). The
// body's content type reaches the service as metadata.
func (RawMarshaler) NewDecoder(r io.Reader) runtime.Decoder {
	return runtime.DecoderFunc(func(v any) error {
		data, err := io.ReadAll(r)
		if err != nil {
			return fmt.Errorf("read request body: %w", err)
		}
		return setBody(v, data)
	})
}

// NewEncoder writes what Marshal returns.
func (m RawMarshaler) NewEncoder(w io.Writer) runtime.Encoder {
	return runtime.EncoderFunc(func(v any) error {
		b, err := m.Marshal(v)
		if err != nil {
			return err
		}
		_, err = w.Write(b)
		return err
	})
}

// Delimiter is empty: every watch frame carries its own trailing newline,
// and the first, empty frame only flushes the headers.
func (RawMarshaler) Delimiter() []byte { return nil }

func setBody(v any, data []byte) error {
	switch t := v.(type) {
	case **httpbody.HttpBody:
		*t = &httpbody.HttpBody{Data: data}
	case *httpbody.HttpBody:
		t.Data = data
	default:
		return fmt.Errorf("request body cannot be decoded into %T", v)
	}
	return nil
}
