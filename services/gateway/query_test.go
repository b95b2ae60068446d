package gateway

import (
	"net/url"
	"testing"

	"github.com/grpc-ecosystem/grpc-gateway/v2/utilities"
	"google.golang.org/genproto/googleapis/api/httpbody"
	"google.golang.org/protobuf/proto"

	gatewayv1 "github.com/crdplane/crdplane/proto/crdplane/gateway/v1"
	"github.com/crdplane/crdplane/services/gateway/httpx"
)

// TestKubeQueryParser checks query parameters read as kube-apiserver's
// parameter codec reads them (errors as upstream v1.33 words them).
func TestKubeQueryParser(t *testing.T) {
	grace := func(v int64) *int64 { return &v }
	yes := true
	filter := utilities.NewDoubleArray([][]string{{"group"}, {"body"}})
	for _, tc := range []struct {
		name    string
		msg     proto.Message
		query   string
		want    proto.Message
		wantErr string
	}{
		{"limit", &gatewayv1.ListRequest{}, "limit=5&continue=c&labelSelector=a%3Db", &gatewayv1.ListRequest{Limit: 5, Continue: "c", LabelSelector: "a=b"}, ""},
		{"non-numeric limit", &gatewayv1.ListRequest{}, "limit=many", nil, `strconv.ParseInt: parsing "many": invalid syntax`},
		{"empty limit", &gatewayv1.ListRequest{}, "limit=", nil, `strconv.ParseInt: parsing "": invalid syntax`},
		{"first value", &gatewayv1.ListRequest{}, "limit=1&limit=many", &gatewayv1.ListRequest{Limit: 1}, ""},
		{"timeoutSeconds before limit", &gatewayv1.ListRequest{}, "limit=many&timeoutSeconds=x", nil, `strconv.ParseInt: parsing "x": invalid syntax`},
		{"proto names ignored", &gatewayv1.ListRequest{}, "label_selector=a&resource_version=x", &gatewayv1.ListRequest{}, ""},
		{"booleans", &gatewayv1.ListRequest{}, "allowWatchBookmarks=maybe&watch=0&sendInitialEvents=FALSE", &gatewayv1.ListRequest{AllowWatchBookmarks: true, SendInitialEvents: new(bool)}, ""},
		{"pretty", &gatewayv1.ListRequest{}, "pretty=maybe", &gatewayv1.ListRequest{}, ""},
		{"pretty true", &gatewayv1.GetRequest{}, "pretty=1", &gatewayv1.GetRequest{Pretty: true}, ""},
		{"path parameters win", &gatewayv1.GetRequest{Group: "g"}, "group=x&resourceVersion=5", &gatewayv1.GetRequest{Group: "g", ResourceVersion: "5"}, ""},
		{"grace", &gatewayv1.DeleteRequest{}, "gracePeriodSeconds=0&dryRun=All&dryRun=x&propagationPolicy=Orphan", &gatewayv1.DeleteRequest{GracePeriodSeconds: grace(0), DryRun: []string{"All", "x"}, PropagationPolicy: "Orphan"}, ""},
		{"bad grace", &gatewayv1.DeleteRequest{}, "gracePeriodSeconds=soon", nil, `strconv.ParseInt: parsing "soon": invalid syntax`},
		{"a body's delete options", &gatewayv1.DeleteRequest{Body: &httpbody.HttpBody{Data: []byte("{}")}}, "gracePeriodSeconds=soon&dryRun=All&pretty=true",
			&gatewayv1.DeleteRequest{Body: &httpbody.HttpBody{Data: []byte("{}")}, Pretty: true}, ""},
		{"a body's deletecollection options", &gatewayv1.DeleteCollectionRequest{Body: &httpbody.HttpBody{Data: []byte("{}")}}, "gracePeriodSeconds=soon&labelSelector=a",
			&gatewayv1.DeleteCollectionRequest{Body: &httpbody.HttpBody{Data: []byte("{}")}, LabelSelector: "a"}, ""},
		{"force", &gatewayv1.PatchRequest{}, "force=", &gatewayv1.PatchRequest{Force: yes}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			q, err := url.ParseQuery(tc.query)
			if err != nil {
				t.Fatal(err)
			}
			err = httpx.KubeQueryParser{}.Parse(tc.msg, q, filter)
			if tc.wantErr != "" {
				if err == nil || err.Error() != tc.wantErr {
					t.Fatalf("got %v, want %s", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !proto.Equal(tc.msg, tc.want) {
				t.Fatalf("got %v, want %v", tc.msg, tc.want)
			}
		})
	}
}
