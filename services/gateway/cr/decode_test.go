package cr

import (
	"testing"

	"github.com/crdplane/crdplane/services/gateway/httpx"
	"github.com/crdplane/crdplane/services/gateway/listing"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestDecodeCustomResourceAsUpstream checks create/update bodies against
// the answers of upstream's apiextensions-apiserver v1.33 (recorded from
// it, with a CRD like testResource's: stable.example.com CronTab, v1 and
// v1beta1 served) for the default field validation (a strict decode),
// Ignore (a lenient one) and Strict: "" is a body upstream decodes (a
// wrong kind or a missing name fail later, in validation).
func TestDecodeCustomResourceAsUpstream(t *testing.T) {
	r := testResource()
	tests := []struct {
		fieldValidation, name, contentType, body, want string
	}{
		{"", "ok", "application/json", `{"apiVersion":"stable.example.com/v1","kind":"CronTab","metadata":{"name":"ok1"}}`, ""},
		{"", "array", "application/json", `[1, 2]`, "the object provided is unrecognized (must be of type CronTab): couldn't get version/kind; json parse error: json: cannot unmarshal array into Go value of type struct { APIVersion string \"json:\\\"apiVersion,omitempty\\\"\"; Kind string \"json:\\\"kind,omitempty\\\"\" } (5b312c20325d)"},
		{"", "string", "application/json", `"x"`, "the object provided is unrecognized (must be of type CronTab): couldn't get version/kind; json parse error: json: cannot unmarshal string into Go value of type struct { APIVersion string \"json:\\\"apiVersion,omitempty\\\"\"; Kind string \"json:\\\"kind,omitempty\\\"\" } (227822)"},
		{"", "number", "application/json", `5`, "the object provided is unrecognized (must be of type CronTab): couldn't get version/kind; json parse error: json: cannot unmarshal number into Go value of type struct { APIVersion string \"json:\\\"apiVersion,omitempty\\\"\"; Kind string \"json:\\\"kind,omitempty\\\"\" } (35)"},
		{"", "null", "application/json", `null`, "the object provided is unrecognized (must be of type CronTab): Object 'Kind' is missing in 'null' (6e756c6c)"},
		{"", "empty", "application/json", ``, "the object provided is unrecognized (must be of type CronTab): couldn't get version/kind; json parse error: unexpected end of JSON input (<empty>)"},
		{"", "syntax", "application/json", `{"apiVersion": `, "the object provided is unrecognized (must be of type CronTab): couldn't get version/kind; json parse error: unexpected end of JSON input ({\"apiVersion\": )"},
		{"", "trailing", "application/json", `{"apiVersion":"stable.example.com/v1","kind":"CronTab"} {}`, "the object provided is unrecognized (must be of type CronTab): couldn't get version/kind; json parse error: invalid character '{' after top-level value ({\"apiVersion\":\"stable.example. ...)"},
		{"", "missing kind", "application/json", `{"apiVersion":"stable.example.com/v1","metadata":{"name":"x"}}`, "the object provided is unrecognized (must be of type CronTab): Object 'Kind' is missing in '{\"apiVersion\":\"stable.example.com/v1\",\"metadata\":{\"name\":\"x\"}}' ({\"apiVersion\":\"stable.example. ...)"},
		{"", "missing both", "application/json", `{"metadata":{"name":"x"}}`, "the object provided is unrecognized (must be of type CronTab): Object 'Kind' is missing in '{\"metadata\":{\"name\":\"x\"}}' ({\"metadata\":{\"name\":\"x\"}})"},
		{"", "missing kind ws", "application/json", `  {"apiVersion":"stable.example.com/v1"}  `, "the object provided is unrecognized (must be of type CronTab): Object 'Kind' is missing in '  {\"apiVersion\":\"stable.example.com/v1\"}  ' (20207b2261706956657273696f6e223a22737461626c652e6578616d706c ...)"},
		{"", "missing kind other gv", "application/json", `{"apiVersion":"other.example.com/v2"}`, "the object provided is unrecognized (must be of type CronTab): Object 'Kind' is missing in '{\"apiVersion\":\"other.example.com/v2\"}' ({\"apiVersion\":\"other.example.c ...)"},
		{"", "missing kind core", "application/json", `{"apiVersion":"v3"}`, "the object provided is unrecognized (must be of type CronTab): Object 'Kind' is missing in '{\"apiVersion\":\"v3\"}' ({\"apiVersion\":\"v3\"})"},
		{"", "kind null", "application/json", `{"apiVersion":"stable.example.com/v1","kind":null}`, "the object provided is unrecognized (must be of type CronTab): Object 'Kind' is missing in '{\"apiVersion\":\"stable.example.com/v1\",\"kind\":null}' ({\"apiVersion\":\"stable.example. ...)"},
		{"", "kind number", "application/json", `{"apiVersion":"stable.example.com/v1","kind":5}`, "the object provided is unrecognized (must be of type CronTab): couldn't get version/kind; json parse error: json: cannot unmarshal number into Go struct field .kind of type string ({\"apiVersion\":\"stable.example. ...)"},
		{"", "KIND", "application/json", `{"apiVersion":"stable.example.com/v1","KIND":"CronTab"}`, "the object provided is unrecognized (must be of type CronTab): Object 'Kind' is missing in '{\"apiVersion\":\"stable.example.com/v1\",\"KIND\":\"CronTab\"}' ({\"apiVersion\":\"stable.example. ...)"},
		{"", "Kind and kind", "application/json", `{"apiVersion":"stable.example.com/v1","kind":"CronTab","Kind":5}`, "the object provided is unrecognized (must be of type CronTab): couldn't get version/kind; json parse error: json: cannot unmarshal number into Go struct field .kind of type string ({\"apiVersion\":\"stable.example. ...)"},
		{"", "missing apiVersion", "application/json", `{"kind":"CronTab","metadata":{"name":"x"}}`, "the API version in the data () does not match the expected API version (stable.example.com/v1)"},
		{"", "apiVersion null", "application/json", `{"apiVersion":null,"kind":"CronTab","metadata":{"name":"x"}}`, "CronTab in version \"\" cannot be handled as a CronTab: .apiVersion accessor error: <nil> is of the type <nil>, expected string"},
		{"", "apiVersion number", "application/json", `{"apiVersion":1,"kind":"CronTab"}`, "the object provided is unrecognized (must be of type CronTab): couldn't get version/kind; json parse error: json: cannot unmarshal number into Go struct field .apiVersion of type string ({\"apiVersion\":1,\"kind\":\"CronTa ...)"},
		{"", "apiVersion bad", "application/json", `{"apiVersion":"a/b/c","kind":"CronTab"}`, "the object provided is unrecognized (must be of type CronTab): unexpected GroupVersion string: a/b/c ({\"apiVersion\":\"a/b/c\",\"kind\":\" ...)"},
		{"", "other group", "application/json", `{"apiVersion":"other.example.com/v1","kind":"CronTab"}`, "the API version in the data (other.example.com/v1) does not match the expected API version (stable.example.com/v1)"},
		{"", "unknown version", "application/json", `{"apiVersion":"stable.example.com/v9","kind":"CronTab"}`, "the API version in the data (stable.example.com/v9) does not match the expected API version (stable.example.com/v1)"},
		{"", "other version", "application/json", `{"apiVersion":"stable.example.com/v1beta1","kind":"CronTab"}`, "the API version in the data (stable.example.com/v1beta1) does not match the expected API version (stable.example.com/v1)"},
		{"", "core", "application/json", `{"apiVersion":"v1","kind":"CronTab"}`, "the API version in the data (v1) does not match the expected API version (stable.example.com/v1)"},
		{"", "metadata string", "application/json", `{"apiVersion":"stable.example.com/v1","kind":"CronTab","metadata":"hello"}`, "CronTab in version \"v1\" cannot be handled as a CronTab: json: cannot unmarshal string into Go value of type v1.ObjectMeta"},
		{"", "metadata string other kind", "application/json", `{"apiVersion":"stable.example.com/v1","kind":"Other","metadata":"hello"}`, "Other in version \"v1\" cannot be handled as a CronTab: json: cannot unmarshal string into Go value of type v1.ObjectMeta"},
		{"", "metadata string other gv", "application/json", `{"apiVersion":"x.example.com/v2","kind":"CronTab","metadata":"hello"}`, "CronTab in version \"v2\" cannot be handled as a CronTab: json: cannot unmarshal string into Go value of type v1.ObjectMeta"},
		{"", "metadata name number", "application/json", `{"apiVersion":"stable.example.com/v1","kind":"CronTab","metadata":{"name":5}}`, "CronTab in version \"v1\" cannot be handled as a CronTab: json: cannot unmarshal number into Go struct field ObjectMeta.name of type string"},
		{"", "metadata null", "application/json", `{"apiVersion":"stable.example.com/v1","kind":"CronTab","metadata":null}`, ""},
		{"", "metadata bad time", "application/json", `{"apiVersion":"stable.example.com/v1","kind":"CronTab","metadata":{"name":"t","creationTimestamp":"yesterday"}}`, "CronTab in version \"v1\" cannot be handled as a CronTab: parsing time \"yesterday\" as \"2006-01-02T15:04:05Z07:00\": cannot parse \"yesterday\" as \"2006\""},
		{"", "big number", "application/json", `{"apiVersion":"stable.example.com/v1","kind":"CronTab","metadata":{"name":"bn"},"spec":{"x":1e400}}`, "CronTab in version \"v1\" cannot be handled as a CronTab: json: cannot unmarshal number 1e400 into Go value of type float64"},
		{"", "wrong kind", "application/json", `{"apiVersion":"stable.example.com/v1","kind":"Gadget","metadata":{"name":"x"}}`, ""},
		{"Ignore", "ok", "application/json", `{"apiVersion":"stable.example.com/v1","kind":"CronTab","metadata":{"name":"ok1"}}`, ""},
		{"Ignore", "array", "application/json", `[1, 2]`, "the object provided is unrecognized (must be of type CronTab): couldn't get version/kind; json parse error: json: cannot unmarshal array into Go value of type struct { APIVersion string \"json:\\\"apiVersion,omitempty\\\"\"; Kind string \"json:\\\"kind,omitempty\\\"\" } (5b312c20325d)"},
		{"Ignore", "string", "application/json", `"x"`, "the object provided is unrecognized (must be of type CronTab): couldn't get version/kind; json parse error: json: cannot unmarshal string into Go value of type struct { APIVersion string \"json:\\\"apiVersion,omitempty\\\"\"; Kind string \"json:\\\"kind,omitempty\\\"\" } (227822)"},
		{"Ignore", "number", "application/json", `5`, "the object provided is unrecognized (must be of type CronTab): couldn't get version/kind; json parse error: json: cannot unmarshal number into Go value of type struct { APIVersion string \"json:\\\"apiVersion,omitempty\\\"\"; Kind string \"json:\\\"kind,omitempty\\\"\" } (35)"},
		{"Ignore", "null", "application/json", `null`, "CronTab in version \"v1\" cannot be handled as a CronTab: Object 'Kind' is missing in 'null'"},
		{"Ignore", "empty", "application/json", ``, "the object provided is unrecognized (must be of type CronTab): couldn't get version/kind; json parse error: unexpected end of JSON input (<empty>)"},
		{"Ignore", "syntax", "application/json", `{"apiVersion": `, "the object provided is unrecognized (must be of type CronTab): couldn't get version/kind; json parse error: unexpected end of JSON input ({\"apiVersion\": )"},
		{"Ignore", "trailing", "application/json", `{"apiVersion":"stable.example.com/v1","kind":"CronTab"} {}`, "the object provided is unrecognized (must be of type CronTab): couldn't get version/kind; json parse error: invalid character '{' after top-level value ({\"apiVersion\":\"stable.example. ...)"},
		{"Ignore", "missing kind", "application/json", `{"apiVersion":"stable.example.com/v1","metadata":{"name":"x"}}`, "CronTab in version \"v1\" cannot be handled as a CronTab: Object 'Kind' is missing in '{\"apiVersion\":\"stable.example.com/v1\",\"metadata\":{\"name\":\"x\"}}'"},
		{"Ignore", "missing both", "application/json", `{"metadata":{"name":"x"}}`, "CronTab in version \"v1\" cannot be handled as a CronTab: Object 'Kind' is missing in '{\"metadata\":{\"name\":\"x\"}}'"},
		{"Ignore", "missing kind ws", "application/json", `  {"apiVersion":"stable.example.com/v1"}  `, "CronTab in version \"v1\" cannot be handled as a CronTab: Object 'Kind' is missing in '{\"apiVersion\":\"stable.example.com/v1\"}'"},
		{"Ignore", "missing kind other gv", "application/json", `{"apiVersion":"other.example.com/v2"}`, "CronTab in version \"v2\" cannot be handled as a CronTab: Object 'Kind' is missing in '{\"apiVersion\":\"other.example.com/v2\"}'"},
		{"Ignore", "missing kind core", "application/json", `{"apiVersion":"v3"}`, "CronTab in version \"v3\" cannot be handled as a CronTab: Object 'Kind' is missing in '{\"apiVersion\":\"v3\"}'"},
		{"Ignore", "kind null", "application/json", `{"apiVersion":"stable.example.com/v1","kind":null}`, "CronTab in version \"v1\" cannot be handled as a CronTab: Object 'Kind' is missing in '{\"apiVersion\":\"stable.example.com/v1\",\"kind\":null}'"},
		{"Ignore", "kind number", "application/json", `{"apiVersion":"stable.example.com/v1","kind":5}`, "the object provided is unrecognized (must be of type CronTab): couldn't get version/kind; json parse error: json: cannot unmarshal number into Go struct field .kind of type string ({\"apiVersion\":\"stable.example. ...)"},
		{"Ignore", "KIND", "application/json", `{"apiVersion":"stable.example.com/v1","KIND":"CronTab"}`, "CronTab in version \"v1\" cannot be handled as a CronTab: Object 'Kind' is missing in '{\"apiVersion\":\"stable.example.com/v1\",\"KIND\":\"CronTab\"}'"},
		{"Ignore", "Kind and kind", "application/json", `{"apiVersion":"stable.example.com/v1","kind":"CronTab","Kind":5}`, "the object provided is unrecognized (must be of type CronTab): couldn't get version/kind; json parse error: json: cannot unmarshal number into Go struct field .kind of type string ({\"apiVersion\":\"stable.example. ...)"},
		{"Ignore", "missing apiVersion", "application/json", `{"kind":"CronTab","metadata":{"name":"x"}}`, "the API version in the data () does not match the expected API version (stable.example.com/v1)"},
		{"Ignore", "apiVersion null", "application/json", `{"apiVersion":null,"kind":"CronTab","metadata":{"name":"x"}}`, "CronTab in version \"\" cannot be handled as a CronTab: .apiVersion accessor error: <nil> is of the type <nil>, expected string"},
		{"Ignore", "apiVersion number", "application/json", `{"apiVersion":1,"kind":"CronTab"}`, "the object provided is unrecognized (must be of type CronTab): couldn't get version/kind; json parse error: json: cannot unmarshal number into Go struct field .apiVersion of type string ({\"apiVersion\":1,\"kind\":\"CronTa ...)"},
		{"Ignore", "apiVersion bad", "application/json", `{"apiVersion":"a/b/c","kind":"CronTab"}`, "the object provided is unrecognized (must be of type CronTab): unexpected GroupVersion string: a/b/c ({\"apiVersion\":\"a/b/c\",\"kind\":\" ...)"},
		{"Ignore", "other group", "application/json", `{"apiVersion":"other.example.com/v1","kind":"CronTab"}`, "the API version in the data (other.example.com/v1) does not match the expected API version (stable.example.com/v1)"},
		{"Ignore", "unknown version", "application/json", `{"apiVersion":"stable.example.com/v9","kind":"CronTab"}`, "the API version in the data (stable.example.com/v9) does not match the expected API version (stable.example.com/v1)"},
		{"Ignore", "other version", "application/json", `{"apiVersion":"stable.example.com/v1beta1","kind":"CronTab"}`, "the API version in the data (stable.example.com/v1beta1) does not match the expected API version (stable.example.com/v1)"},
		{"Ignore", "core", "application/json", `{"apiVersion":"v1","kind":"CronTab"}`, "the API version in the data (v1) does not match the expected API version (stable.example.com/v1)"},
		{"Ignore", "metadata string", "application/json", `{"apiVersion":"stable.example.com/v1","kind":"CronTab","metadata":"hello"}`, "CronTab in version \"v1\" cannot be handled as a CronTab: json: cannot unmarshal string into Go value of type v1.ObjectMeta"},
		{"Ignore", "metadata string other kind", "application/json", `{"apiVersion":"stable.example.com/v1","kind":"Other","metadata":"hello"}`, "Other in version \"v1\" cannot be handled as a CronTab: json: cannot unmarshal string into Go value of type v1.ObjectMeta"},
		{"Ignore", "metadata string other gv", "application/json", `{"apiVersion":"x.example.com/v2","kind":"CronTab","metadata":"hello"}`, "CronTab in version \"v2\" cannot be handled as a CronTab: json: cannot unmarshal string into Go value of type v1.ObjectMeta"},
		{"Ignore", "metadata name number", "application/json", `{"apiVersion":"stable.example.com/v1","kind":"CronTab","metadata":{"name":5}}`, "CronTab in version \"v1\" cannot be handled as a CronTab: json: cannot unmarshal number into Go struct field ObjectMeta.name of type string"},
		{"Ignore", "metadata null", "application/json", `{"apiVersion":"stable.example.com/v1","kind":"CronTab","metadata":null}`, ""},
		{"Ignore", "metadata bad time", "application/json", `{"apiVersion":"stable.example.com/v1","kind":"CronTab","metadata":{"name":"t","creationTimestamp":"yesterday"}}`, "CronTab in version \"v1\" cannot be handled as a CronTab: parsing time \"yesterday\" as \"2006-01-02T15:04:05Z07:00\": cannot parse \"yesterday\" as \"2006\""},
		{"Ignore", "big number", "application/json", `{"apiVersion":"stable.example.com/v1","kind":"CronTab","metadata":{"name":"bn"},"spec":{"x":1e400}}`, "CronTab in version \"v1\" cannot be handled as a CronTab: json: cannot unmarshal number 1e400 into Go value of type float64"},
		{"Ignore", "wrong kind", "application/json", `{"apiVersion":"stable.example.com/v1","kind":"Gadget","metadata":{"name":"x"}}`, ""},
		{"Strict", "ok", "application/json", `{"apiVersion":"stable.example.com/v1","kind":"CronTab","metadata":{"name":"ok1"}}`, ""},
		{"Strict", "array", "application/json", `[1, 2]`, "the object provided is unrecognized (must be of type CronTab): couldn't get version/kind; json parse error: json: cannot unmarshal array into Go value of type struct { APIVersion string \"json:\\\"apiVersion,omitempty\\\"\"; Kind string \"json:\\\"kind,omitempty\\\"\" } (5b312c20325d)"},
		{"Strict", "string", "application/json", `"x"`, "the object provided is unrecognized (must be of type CronTab): couldn't get version/kind; json parse error: json: cannot unmarshal string into Go value of type struct { APIVersion string \"json:\\\"apiVersion,omitempty\\\"\"; Kind string \"json:\\\"kind,omitempty\\\"\" } (227822)"},
		{"Strict", "number", "application/json", `5`, "the object provided is unrecognized (must be of type CronTab): couldn't get version/kind; json parse error: json: cannot unmarshal number into Go value of type struct { APIVersion string \"json:\\\"apiVersion,omitempty\\\"\"; Kind string \"json:\\\"kind,omitempty\\\"\" } (35)"},
		{"Strict", "null", "application/json", `null`, "the object provided is unrecognized (must be of type CronTab): Object 'Kind' is missing in 'null' (6e756c6c)"},
		{"Strict", "empty", "application/json", ``, "the object provided is unrecognized (must be of type CronTab): couldn't get version/kind; json parse error: unexpected end of JSON input (<empty>)"},
		{"Strict", "syntax", "application/json", `{"apiVersion": `, "the object provided is unrecognized (must be of type CronTab): couldn't get version/kind; json parse error: unexpected end of JSON input ({\"apiVersion\": )"},
		{"Strict", "trailing", "application/json", `{"apiVersion":"stable.example.com/v1","kind":"CronTab"} {}`, "the object provided is unrecognized (must be of type CronTab): couldn't get version/kind; json parse error: invalid character '{' after top-level value ({\"apiVersion\":\"stable.example. ...)"},
		{"Strict", "missing kind", "application/json", `{"apiVersion":"stable.example.com/v1","metadata":{"name":"x"}}`, "the object provided is unrecognized (must be of type CronTab): Object 'Kind' is missing in '{\"apiVersion\":\"stable.example.com/v1\",\"metadata\":{\"name\":\"x\"}}' ({\"apiVersion\":\"stable.example. ...)"},
		{"Strict", "missing both", "application/json", `{"metadata":{"name":"x"}}`, "the object provided is unrecognized (must be of type CronTab): Object 'Kind' is missing in '{\"metadata\":{\"name\":\"x\"}}' ({\"metadata\":{\"name\":\"x\"}})"},
		{"Strict", "missing kind ws", "application/json", `  {"apiVersion":"stable.example.com/v1"}  `, "the object provided is unrecognized (must be of type CronTab): Object 'Kind' is missing in '  {\"apiVersion\":\"stable.example.com/v1\"}  ' (20207b2261706956657273696f6e223a22737461626c652e6578616d706c ...)"},
		{"Strict", "missing kind other gv", "application/json", `{"apiVersion":"other.example.com/v2"}`, "the object provided is unrecognized (must be of type CronTab): Object 'Kind' is missing in '{\"apiVersion\":\"other.example.com/v2\"}' ({\"apiVersion\":\"other.example.c ...)"},
		{"Strict", "missing kind core", "application/json", `{"apiVersion":"v3"}`, "the object provided is unrecognized (must be of type CronTab): Object 'Kind' is missing in '{\"apiVersion\":\"v3\"}' ({\"apiVersion\":\"v3\"})"},
		{"Strict", "kind null", "application/json", `{"apiVersion":"stable.example.com/v1","kind":null}`, "the object provided is unrecognized (must be of type CronTab): Object 'Kind' is missing in '{\"apiVersion\":\"stable.example.com/v1\",\"kind\":null}' ({\"apiVersion\":\"stable.example. ...)"},
		{"Strict", "kind number", "application/json", `{"apiVersion":"stable.example.com/v1","kind":5}`, "the object provided is unrecognized (must be of type CronTab): couldn't get version/kind; json parse error: json: cannot unmarshal number into Go struct field .kind of type string ({\"apiVersion\":\"stable.example. ...)"},
		{"Strict", "KIND", "application/json", `{"apiVersion":"stable.example.com/v1","KIND":"CronTab"}`, "the object provided is unrecognized (must be of type CronTab): Object 'Kind' is missing in '{\"apiVersion\":\"stable.example.com/v1\",\"KIND\":\"CronTab\"}' ({\"apiVersion\":\"stable.example. ...)"},
		{"Strict", "Kind and kind", "application/json", `{"apiVersion":"stable.example.com/v1","kind":"CronTab","Kind":5}`, "the object provided is unrecognized (must be of type CronTab): couldn't get version/kind; json parse error: json: cannot unmarshal number into Go struct field .kind of type string ({\"apiVersion\":\"stable.example. ...)"},
		{"Strict", "missing apiVersion", "application/json", `{"kind":"CronTab","metadata":{"name":"x"}}`, "the API version in the data () does not match the expected API version (stable.example.com/v1)"},
		{"Strict", "apiVersion null", "application/json", `{"apiVersion":null,"kind":"CronTab","metadata":{"name":"x"}}`, "CronTab in version \"\" cannot be handled as a CronTab: .apiVersion accessor error: <nil> is of the type <nil>, expected string"},
		{"Strict", "apiVersion number", "application/json", `{"apiVersion":1,"kind":"CronTab"}`, "the object provided is unrecognized (must be of type CronTab): couldn't get version/kind; json parse error: json: cannot unmarshal number into Go struct field .apiVersion of type string ({\"apiVersion\":1,\"kind\":\"CronTa ...)"},
		{"Strict", "apiVersion bad", "application/json", `{"apiVersion":"a/b/c","kind":"CronTab"}`, "the object provided is unrecognized (must be of type CronTab): unexpected GroupVersion string: a/b/c ({\"apiVersion\":\"a/b/c\",\"kind\":\" ...)"},
		{"Strict", "other group", "application/json", `{"apiVersion":"other.example.com/v1","kind":"CronTab"}`, "the API version in the data (other.example.com/v1) does not match the expected API version (stable.example.com/v1)"},
		{"Strict", "unknown version", "application/json", `{"apiVersion":"stable.example.com/v9","kind":"CronTab"}`, "the API version in the data (stable.example.com/v9) does not match the expected API version (stable.example.com/v1)"},
		{"Strict", "other version", "application/json", `{"apiVersion":"stable.example.com/v1beta1","kind":"CronTab"}`, "the API version in the data (stable.example.com/v1beta1) does not match the expected API version (stable.example.com/v1)"},
		{"Strict", "core", "application/json", `{"apiVersion":"v1","kind":"CronTab"}`, "the API version in the data (v1) does not match the expected API version (stable.example.com/v1)"},
		{"Strict", "metadata string", "application/json", `{"apiVersion":"stable.example.com/v1","kind":"CronTab","metadata":"hello"}`, "CronTab in version \"v1\" cannot be handled as a CronTab: json: cannot unmarshal string into Go value of type v1.ObjectMeta"},
		{"Strict", "metadata string other kind", "application/json", `{"apiVersion":"stable.example.com/v1","kind":"Other","metadata":"hello"}`, "Other in version \"v1\" cannot be handled as a CronTab: json: cannot unmarshal string into Go value of type v1.ObjectMeta"},
		{"Strict", "metadata string other gv", "application/json", `{"apiVersion":"x.example.com/v2","kind":"CronTab","metadata":"hello"}`, "CronTab in version \"v2\" cannot be handled as a CronTab: json: cannot unmarshal string into Go value of type v1.ObjectMeta"},
		{"Strict", "metadata name number", "application/json", `{"apiVersion":"stable.example.com/v1","kind":"CronTab","metadata":{"name":5}}`, "CronTab in version \"v1\" cannot be handled as a CronTab: json: cannot unmarshal number into Go struct field ObjectMeta.name of type string"},
		{"Strict", "metadata null", "application/json", `{"apiVersion":"stable.example.com/v1","kind":"CronTab","metadata":null}`, ""},
		{"Strict", "metadata bad time", "application/json", `{"apiVersion":"stable.example.com/v1","kind":"CronTab","metadata":{"name":"t","creationTimestamp":"yesterday"}}`, "CronTab in version \"v1\" cannot be handled as a CronTab: parsing time \"yesterday\" as \"2006-01-02T15:04:05Z07:00\": cannot parse \"yesterday\" as \"2006\""},
		{"Strict", "big number", "application/json", `{"apiVersion":"stable.example.com/v1","kind":"CronTab","metadata":{"name":"bn"},"spec":{"x":1e400}}`, "CronTab in version \"v1\" cannot be handled as a CronTab: json: cannot unmarshal number 1e400 into Go value of type float64"},
		{"Strict", "wrong kind", "application/json", `{"apiVersion":"stable.example.com/v1","kind":"Gadget","metadata":{"name":"x"}}`, ""},
		{"", "yaml bad", "application/yaml", `apiVersion: stable.example.com/v1
kind: CronTab
metadata:
  name: [bad
`, "the object provided is unrecognized (must be of type CronTab): yaml: line 4: did not find expected ',' or ']' (61706956657273696f6e3a20737461626c652e6578616d706c652e636f6d ...)"},
		{"", "yaml missing kind", "application/yaml", `apiVersion: stable.example.com/v1
metadata:
  name: y
`, "the object provided is unrecognized (must be of type CronTab): Object 'Kind' is missing in 'apiVersion: stable.example.com/v1\nmetadata:\n  name: y\n' (61706956657273696f6e3a20737461626c652e6578616d706c652e636f6d ...)"},
		{"", "yaml empty", "application/yaml", ``, "the object provided is unrecognized (must be of type CronTab): Object 'Kind' is missing in '' (<empty>)"},
		{"Ignore", "yaml bad", "application/yaml", `apiVersion: stable.example.com/v1
kind: CronTab
metadata:
  name: [bad
`, "the object provided is unrecognized (must be of type CronTab): yaml: line 4: did not find expected ',' or ']' (61706956657273696f6e3a20737461626c652e6578616d706c652e636f6d ...)"},
		{"Ignore", "yaml missing kind", "application/yaml", `apiVersion: stable.example.com/v1
metadata:
  name: y
`, "CronTab in version \"v1\" cannot be handled as a CronTab: Object 'Kind' is missing in '{\"apiVersion\":\"stable.example.com/v1\",\"metadata\":{\"name\":true}}'"},
		{"Ignore", "yaml empty", "application/yaml", ``, "CronTab in version \"v1\" cannot be handled as a CronTab: Object 'Kind' is missing in 'null'"},
	}
	for _, tt := range tests {
		t.Run(tt.fieldValidation+"/"+tt.name, func(t *testing.T) {
			body, err := httpx.DecodeBody(tt.contentType, []byte(tt.body))
			if err != nil {
				t.Fatal(err)
			}
			_, err = decodeCustomResource(r, body, decodesStrictly(tt.fieldValidation))
			if tt.want == "" {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			if !apierrors.IsBadRequest(err) || err.Error() != tt.want {
				t.Fatalf("got  %v\nwant %s", err, tt.want)
			}
		})
	}
}

// TestCheckKindNamesTheObject: upstream's type-meta 422 names the object's
// own kind and group (its typer reads them from the object).
func TestCheckKindNamesTheObject(t *testing.T) {
	r := testResource()
	for _, tc := range []struct {
		body, want, group, kind string
	}{
		{`{"apiVersion":"stable.example.com/v1","kind":"CronTab"}`, "", "", ""},
		{`{"apiVersion":"stable.example.com/v1","kind":"Other"}`, `Other.stable.example.com "x" is invalid: kind: Invalid value: "Other": must be CronTab`, "stable.example.com", "Other"},
		{`{"apiVersion":"other.example.com/v1","kind":"CronTab"}`, `CronTab.other.example.com "x" is invalid: apiVersion: Invalid value: "other.example.com/v1": must be stable.example.com/v1`, "other.example.com", "CronTab"},
		{`{"apiVersion":"stable.example.com/v1beta1","kind":"Other"}`, `Other.stable.example.com "x" is invalid: [kind: Invalid value: "Other": must be CronTab, apiVersion: Invalid value: "stable.example.com/v1beta1": must be stable.example.com/v1]`, "stable.example.com", "Other"},
	} {
		obj, err := listing.DecodeObject([]byte(tc.body))
		if err != nil {
			t.Fatal(err)
		}
		err = checkKind(r, obj, "x")
		if tc.want == "" {
			if err != nil {
				t.Errorf("%s: %v", tc.body, err)
			}
			continue
		}
		st, ok := err.(*apierrors.StatusError)
		if !ok || err.Error() != tc.want || st.ErrStatus.Details.Group != tc.group || st.ErrStatus.Details.Kind != tc.kind {
			t.Errorf("%s: got %v (%#v)\nwant %s", tc.body, err, err, tc.want)
		}
	}
}

// TestCheckNameAndNamespace: an update's object must name itself (upstream's
// checkName does not take the URL's name).
func TestCheckNameAndNamespace(t *testing.T) {
	for _, tc := range []struct {
		body       string
		namespaced bool
		want       string
	}{
		{`{"metadata":{"name":"a"}}`, true, ""},
		{`{"metadata":{"name":"a","namespace":"ns"}}`, true, ""},
		{`{"metadata":{"name":"a","namespace":"ns"}}`, false, ""},
		{`{"metadata":{}}`, true, "the name of the object (a based on URL) was undeterminable: name must be provided"},
		{`{}`, true, "the name of the object (a based on URL) was undeterminable: name must be provided"},
		{`{"metadata":{"name":"b"}}`, true, "the name of the object (b) does not match the name on the URL (a)"},
		{`{"metadata":{"namespace":"other"}}`, true, "the namespace of the provided object does not match the namespace sent on the request"},
	} {
		obj, err := listing.DecodeObject([]byte(tc.body))
		if err != nil {
			t.Fatal(err)
		}
		err = checkNameAndNamespace(obj, "ns", "a", tc.namespaced)
		if tc.want == "" {
			if err != nil {
				t.Errorf("%s: %v", tc.body, err)
			}
			continue
		}
		if !apierrors.IsBadRequest(err) || err.Error() != tc.want {
			t.Errorf("%s: got %v, want %s", tc.body, err, tc.want)
		}
	}
}

// TestDecodeScaleUpdate: every Scale body upstream's decoder refuses is the
// same 400 (its handler's typer does not know the Scale type).
func TestDecodeScaleUpdate(t *testing.T) {
	const refused = `no kind is registered for the type v1.Scale in scheme "pkg/runtime/scheme.go:110"`
	for _, tc := range []struct {
		contentType, body string
		replicas          int32
		want              string
	}{
		{"application/json", `{"apiVersion":"autoscaling/v1","kind":"Scale","metadata":{"name":"a"},"spec":{"replicas":3}}`, 3, ""},
		{"application/json", `{"metadata":{"name":"a"},"spec":{"replicas":2}}`, 2, ""},
		{"application/json", `{"kind":"Scale","spec":{"replicas":2}}`, 2, ""},
		// Decoded case-sensitively: "Spec" is no field.
		{"application/json", `{"metadata":{"name":"a"},"Spec":{"replicas":2}}`, 0, ""},
		{"application/json", `{"apiVersion":"autoscaling/v1","kind":"Scale","spec":{"replicas":"five"}}`, 0, refused},
		{"application/json", `{"apiVersion":"stable.example.com/v1","kind":"CronTab","spec":{"replicas":2}}`, 0, refused},
		{"application/json", `{"apiVersion":"extensions/v1beta1","kind":"Scale","spec":{"replicas":2}}`, 0, refused},
		{"application/json", `{"apiVersion":"autoscaling/v2","kind":"Scale"}`, 0, refused},
		{"application/json", `{"apiVersion":"autoscaling/v1","kind":"Other"}`, 0, refused},
		{"application/json", `{"spec":`, 0, refused},
		{"application/json", `[]`, 0, refused},
		{"application/yaml", "spec: [", 0, refused},
	} {
		body, err := httpx.DecodeBody(tc.contentType, []byte(tc.body))
		if err != nil {
			t.Fatal(err)
		}
		s, err := decodeScaleUpdate(body.JSON, body.ConvErr)
		if tc.want == "" {
			if err != nil || s.Spec.Replicas != tc.replicas {
				t.Errorf("%s: got %v, %v", tc.body, s, err)
			}
			continue
		}
		if !apierrors.IsBadRequest(err) || err.Error() != tc.want {
			t.Errorf("%s: got %v", tc.body, err)
		}
	}
}

// TestCheckScaleName: the namespace first, then the name, which a Scale
// must carry.
func TestCheckScaleName(t *testing.T) {
	for _, tc := range []struct {
		name, namespace, want string
	}{
		{"a", "", ""},
		{"a", "ns", ""},
		{"", "", "the name of the object (a based on URL) was undeterminable: name must be provided"},
		{"b", "", "the name of the object (b) does not match the name on the URL (a)"},
		{"b", "other", "the namespace of the provided object does not match the namespace sent on the request"},
	} {
		s := &autoscalingv1.Scale{}
		s.Name, s.Namespace = tc.name, tc.namespace
		err := checkScaleName(s, "a", "ns")
		if (tc.want == "" && err != nil) || (tc.want != "" && (err == nil || err.Error() != tc.want)) {
			t.Errorf("%+v: got %v, want %q", tc, err, tc.want)
		}
	}
}

// TestDecodeDeleteOptions: a DELETE body upstream's decoder refuses is a
// plain 500 with the decoder's message (recorded from upstream v1.33).
func TestDecodeDeleteOptions(t *testing.T) {
	for _, tc := range []struct {
		body string
		want string
	}{
		{`{}`, ""},
		{`{"gracePeriodSeconds":0,"preconditions":{"uid":"u"}}`, ""},
		{`{"apiVersion":"x.example.com/v9","kind":"DeleteOptions"}`, ""},
		{`{"apiVersion":"v1"}`, ""},
		{`{"preconditions": `, "couldn't get version/kind; json parse error: unexpected end of JSON input"},
		{`{"apiVersion":"route.example.com/v1","kind":"Widget"}`, `no kind "Widget" is registered for version "route.example.com/v1" in scheme "pkg/runtime/scheme.go:110"`},
		{`{"gracePeriodSeconds":"x"}`, "json: cannot unmarshal string into Go struct field DeleteOptions.gracePeriodSeconds of type int64"},
		{`{"apiVersion":"a/b/c"}`, "unexpected GroupVersion string: a/b/c"},
		{`[]`, `couldn't get version/kind; json parse error: json: cannot unmarshal array into Go value of type struct { APIVersion string "json:\"apiVersion,omitempty\""; Kind string "json:\"kind,omitempty\"" }`},
	} {
		opts := &metav1.DeleteOptions{}
		err := decodeDeleteOptions([]byte(tc.body), opts)
		if tc.want == "" {
			if err != nil {
				t.Errorf("%s: %v", tc.body, err)
			}
			continue
		}
		st, ok := err.(*apierrors.StatusError)
		if !ok || st.ErrStatus.Code != 500 || st.ErrStatus.Reason != "" || err.Error() != tc.want {
			t.Errorf("%s: got %#v\nwant %s", tc.body, err, tc.want)
		}
	}
}
