// Package conversion converts CronTab objects between the versions of the
// CronTab CRD in the Kubernetes documentation's webhook conversion example:
//
//	v1beta1: hostPort: "localhost:1234"
//	v1:      host: "localhost", port: "1234"
//
// and serves the conversions as a conversion webhook (Handler:
// ConversionReview apiextensions.k8s.io/v1 and v1beta1). To write a webhook
// for your own CRD, replace Convert and keep the rest.
package conversion

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
)

// Versions of the CronTab CRD this package converts between.
const (
	V1beta1 = "v1beta1"
	V1      = "v1"
)

// errHostPort is the reference's message for a hostPort without a port.
var errHostPort = errors.New("hostPort could not be parsed into a separate host and port")

// Convert converts obj, a decoded CronTab, to desiredAPIVersion in place.
// Nothing else than the version's fields and apiVersion changes: metadata
// is left alone (the API server keeps its own anyway, apart from labels and
// annotations).
//
// v1beta1 → v1 splits hostPort at its last colon, so every hostPort that
// converts comes back unchanged (v1beta1 → v1 → v1beta1 is lossless); a
// hostPort without a colon is refused. v1 → v1beta1 joins host and port
// with a colon.
func Convert(obj map[string]any, desiredAPIVersion string) error {
	from, _ := obj["apiVersion"].(string)
	fromGroup, fromVersion := splitAPIVersion(from)
	toGroup, toVersion := splitAPIVersion(desiredAPIVersion)
	if fromGroup != toGroup {
		return fmt.Errorf("unexpected conversion from %q to %q: not the same group", from, desiredAPIVersion)
	}
	switch {
	case fromVersion == toVersion:
	case fromVersion == V1beta1 && toVersion == V1:
		if err := hostPortToHostAndPort(obj); err != nil {
			return err
		}
	case fromVersion == V1 && toVersion == V1beta1:
		if err := hostAndPortToHostPort(obj); err != nil {
			return err
		}
	default:
		return fmt.Errorf("unexpected conversion from %q to %q", from, desiredAPIVersion)
	}
	obj["apiVersion"] = desiredAPIVersion
	return nil
}

func hostPortToHostAndPort(obj map[string]any) error {
	v, ok := obj["hostPort"]
	if !ok {
		return nil
	}
	hostPort, ok := v.(string)
	if !ok {
		return fmt.Errorf("hostPort must be a string, not %T", v)
	}
	i := strings.LastIndexByte(hostPort, ':')
	if i < 0 {
		return errHostPort
	}
	delete(obj, "hostPort")
	obj["host"] = hostPort[:i]
	obj["port"] = hostPort[i+1:]
	return nil
}

func hostAndPortToHostPort(obj map[string]any) error {
	host, hasHost := obj["host"]
	port, hasPort := obj["port"]
	if !hasHost && !hasPort {
		return nil
	}
	h, ok := host.(string)
	if hasHost && !ok {
		return fmt.Errorf("host must be a string, not %T", host)
	}
	p, ok := port.(string)
	if hasPort && !ok {
		return fmt.Errorf("port must be a string, not %T", port)
	}
	if strings.Contains(p, ":") {
		return fmt.Errorf("port %q must not contain a colon", p)
	}
	delete(obj, "host")
	delete(obj, "port")
	obj["hostPort"] = h + ":" + p
	return nil
}

func splitAPIVersion(apiVersion string) (group, version string) {
	if i := strings.LastIndexByte(apiVersion, '/'); i >= 0 {
		return apiVersion[:i], apiVersion[i+1:]
	}
	return "", apiVersion
}

// ConvertJSON converts one CronTab in JSON. Numbers keep their exact
// text (no float64 round trip).
func ConvertJSON(obj []byte, desiredAPIVersion string) ([]byte, error) {
	d := json.NewDecoder(bytes.NewReader(obj))
	d.UseNumber()
	var m map[string]any
	if err := d.Decode(&m); err != nil {
		return nil, fmt.Errorf("invalid object: %v", err)
	}
	if m == nil {
		return nil, errors.New("invalid object: not a JSON object")
	}
	if err := Convert(m, desiredAPIVersion); err != nil {
		return nil, err
	}
	return json.Marshal(m)
}
