package converter

import (
	"context"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
)

func crontabCRD(strategy apiextensionsv1.ConversionStrategyType) *apiextensionsv1.CustomResourceDefinition {
	crd := &apiextensionsv1.CustomResourceDefinition{}
	crd.Name = "crontabs.stable.example.com"
	crd.Spec.Group = "stable.example.com"
	crd.Spec.Versions = []apiextensionsv1.CustomResourceDefinitionVersion{{Name: "v1beta1", Served: true}, {Name: "v1", Served: true, Storage: true}}
	if strategy != "" {
		crd.Spec.Conversion = &apiextensionsv1.CustomResourceConversion{Strategy: strategy}
	}
	return crd
}

func TestConvertObjects(t *testing.T) {
	objs := [][]byte{[]byte(`{"apiVersion":"stable.example.com/v1beta1","kind":"CronTab","metadata":{"name":"a"}}`)}
	tests := []struct {
		name     string
		crd      *apiextensionsv1.CustomResourceDefinition
		desired  string
		want     string
		wantCode int32
	}{
		{"none default", crontabCRD(""), "stable.example.com/v1", `{"apiVersion":"stable.example.com/v1","kind":"CronTab","metadata":{"name":"a"}}`, 0},
		{"none explicit", crontabCRD(apiextensionsv1.NoneConverter), "stable.example.com/v1", `{"apiVersion":"stable.example.com/v1","kind":"CronTab","metadata":{"name":"a"}}`, 0},
		{"unknown version", crontabCRD(""), "stable.example.com/v9", "", 400},
		{"other group", crontabCRD(""), "other.example.com/v1", "", 400},
		{"webhook not available", crontabCRD(apiextensionsv1.WebhookConverter), "stable.example.com/v1", "", 503},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, err := ConvertObjects(context.Background(), nil, nil, tt.crd, tt.desired, objs)
			if tt.wantCode != 0 {
				se, ok := err.(*apierrors.StatusError)
				if !ok || se.ErrStatus.Code != tt.wantCode {
					t.Fatalf("want %d, got %v", tt.wantCode, err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if string(out[0]) != tt.want {
				t.Fatalf("got %s", out[0])
			}
		})
	}
}
