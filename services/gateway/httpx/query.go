package httpx

import (
	"fmt"
	"net/url"
	"strconv"
	"strings"

	"github.com/grpc-ecosystem/grpc-gateway/v2/utilities"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	gatewayv1 "github.com/crdplane/crdplane/proto/crdplane/gateway/v1"
)

// KubeQueryParser fills a request message from the query string as
// kube-apiserver's parameter codec fills its options (grpc-gateway's
// default parser has other rules and wraps its errors in `parsing field
// "limit": ...`):
//
//   - a parameter is a field's JSON name (resourceVersion, dryRun, ...);
//     proto names and unknown parameters are ignored;
//   - a scalar takes the first value, a list every value;
//   - integers parse with strconv.ParseInt, whose error is the 400's
//     message (`strconv.ParseInt: parsing "many": invalid syntax`);
//   - booleans are false for "0" and "false" (any case) and true for
//     anything else, never an error; pretty, which kube-apiserver reads
//     apart, is strconv.ParseBool's value, false when it does not parse.
//
// Fields are filled in the order of upstream's options structs (the
// messages' but for timeoutSeconds, which ListOptions has before limit),
// so that the first bad parameter is the one reported. A DELETE with a
// body takes its DeleteOptions from the body alone: its dryRun,
// gracePeriodSeconds and propagationPolicy parameters are not read.
type KubeQueryParser struct{}

func (KubeQueryParser) Parse(msg proto.Message, values url.Values, filter *utilities.DoubleArray) error {
	m := msg.ProtoReflect()
	fields := m.Descriptor().Fields()
	deleteBody := false
	switch req := msg.(type) {
	case *gatewayv1.DeleteRequest:
		deleteBody = len(req.GetBody().GetData()) > 0
	case *gatewayv1.DeleteCollectionRequest:
		deleteBody = len(req.GetBody().GetData()) > 0
	}
	for _, i := range queryOrder(fields) {
		fd := fields.Get(i)
		if deleteBody && deleteOptionFields[fd.Name()] {
			continue
		}
		vs := values[fd.JSONName()]
		if len(vs) == 0 || fd.Message() != nil || fd.IsMap() {
			continue
		}
		if filter.HasCommonPrefix([]string{string(fd.Name())}) {
			continue
		}
		if fd.IsList() {
			list := m.Mutable(fd).List()
			for _, v := range vs {
				pv, err := queryValue(fd, v)
				if err != nil {
					return err
				}
				list.Append(pv)
			}
			continue
		}
		pv, err := queryValue(fd, vs[0])
		if err != nil {
			return err
		}
		m.Set(fd, pv)
	}
	return nil
}

// deleteOptionFields are the DeleteOptions of the delete requests.
var deleteOptionFields = map[protoreflect.Name]bool{"dry_run": true, "grace_period_seconds": true, "propagation_policy": true}

// queryOrder is the order fields are read in: declaration order, with
// timeout_seconds moved before limit.
func queryOrder(fields protoreflect.FieldDescriptors) []int {
	order := make([]int, 0, fields.Len())
	limit := -1
	for i := 0; i < fields.Len(); i++ {
		switch fields.Get(i).Name() {
		case "limit":
			limit = len(order)
		case "timeout_seconds":
			if limit >= 0 {
				order = append(order[:limit], append([]int{i}, order[limit:]...)...)
				continue
			}
		}
		order = append(order, i)
	}
	return order
}

// queryValue converts one query value for fd as kube-apiserver's
// parameter conversions do.
func queryValue(fd protoreflect.FieldDescriptor, v string) (protoreflect.Value, error) {
	switch fd.Kind() {
	case protoreflect.StringKind:
		return protoreflect.ValueOfString(v), nil
	case protoreflect.Int64Kind:
		i, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return protoreflect.Value{}, err
		}
		return protoreflect.ValueOfInt64(i), nil
	case protoreflect.BoolKind:
		if fd.Name() == "pretty" {
			b, _ := strconv.ParseBool(v)
			return protoreflect.ValueOfBool(b), nil
		}
		return protoreflect.ValueOfBool(v != "0" && !strings.EqualFold(v, "false")), nil
	}
	return protoreflect.Value{}, fmt.Errorf("query parameter %q: unsupported field type %s", fd.JSONName(), fd.Kind())
}
