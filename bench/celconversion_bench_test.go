package bench

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/client-go/dynamic"
	"sigs.k8s.io/yaml"

	"github.com/crdplane/crdplane/platform"
	"github.com/crdplane/crdplane/platform/platformtest"
	"github.com/crdplane/crdplane/services/converter"
	"github.com/crdplane/crdplane/services/converter/webhook"
)

// celRules is the example webhook's mapping (v1beta1 hostPort ⇄ v1 host +
// port, split at the last colon) as CEL conversion rules.
const celRules = `
    conversion.crdplane.dev/rules: |
      - from: v1beta1
        to: v1
        fields:
        - path: host
          expression: self.hostPort.substring(0, self.hostPort.lastIndexOf(':'))
        - path: port
          expression: self.hostPort.substring(self.hostPort.lastIndexOf(':') + 1)
      - from: v1
        to: v1beta1
        fields:
        - path: hostPort
          expression: self.host + ':' + self.port
`

// celConversionCRD is conversionCRD converting with celRules instead of
// the webhook (strategy None, the rules in their annotation).
var celConversionCRD = func() string {
	doc := strings.Replace(conversionCRD, "  name: crontabs.example.com\n", "  name: crontabs.example.com\n  annotations:"+celRules, 1)
	i := strings.Index(doc, "  conversion:\n")
	return doc[:i] + "  conversion:\n    strategy: None\n"
}()

// celConverterCRD is celConversionCRD as the converter sees it.
func celConverterCRD(b *testing.B) *apiextensionsv1.CustomResourceDefinition {
	crd := &apiextensionsv1.CustomResourceDefinition{}
	if err := yaml.UnmarshalStrict([]byte(celConversionCRD), crd); err != nil {
		b.Fatal(err)
	}
	crd.UID, crd.Generation, crd.ResourceVersion = "bench-cel", 1, "1"
	return crd
}

// BenchmarkCELConversion compares the same mapping (the example webhook's
// CronTab conversion, v1beta1 → v1) done by CEL rules in the converter's
// process and by the example webhook over HTTPS (HTTP/2, keep-alive, on
// loopback), in the converter alone:
//
//   - 1-object: one conversion at a time, one object each (a get); the
//     webhook without coalescing (upstream's one review per request);
//   - 64-parallel: 64 goroutines converting single objects; the webhook
//     coalesced (the converter's default) and not;
//   - list-5000: a 5,000-object list; the webhook chunked (default).
//
// objects/s is the throughput.
func BenchmarkCELConversion(b *testing.B) {
	w := startBenchWebhook(b)
	whCRD, celCRD := converterCRD(w), celConverterCRD(b)
	rules := converter.NewRuleCache()
	const desired = "example.com/v1"
	celConvert := func(objs [][]byte) error {
		out, err := converter.ConvertObjects(context.Background(), nil, rules, celCRD, desired, objs)
		if err == nil && !strings.Contains(string(out[0]), `"port":"8080"`) {
			err = fmt.Errorf("not converted: %s", out[0])
		}
		return err
	}
	webhookConvert := func(c *webhook.Converter) func([][]byte) error {
		return func(objs [][]byte) error {
			out, err := converter.ConvertObjects(context.Background(), c, nil, whCRD, desired, objs)
			if err == nil && !strings.Contains(string(out[0]), `"port":"8080"`) {
				err = fmt.Errorf("not converted: %s", out[0])
			}
			return err
		}
	}
	perRequest := webhook.New(webhook.Config{BatchWindow: -1})
	defer perRequest.Close()
	coalesced := webhook.New(webhook.Config{})
	defer coalesced.Close()

	one := [][]byte{cronTabJSON("ct-00000")}
	for _, bc := range []struct {
		name    string
		convert func([][]byte) error
	}{{"1-object/cel", celConvert}, {"1-object/webhook", webhookConvert(perRequest)}} {
		b.Run(bc.name, func(b *testing.B) {
			for b.Loop() {
				if err := bc.convert(one); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "objects/s")
		})
	}
	for _, bc := range []struct {
		name    string
		convert func([][]byte) error
	}{{"64-parallel/cel", celConvert}, {"64-parallel/webhook-coalesced", webhookConvert(coalesced)}, {"64-parallel/webhook-per-request", webhookConvert(perRequest)}} {
		b.Run(bc.name, func(b *testing.B) {
			var next atomic.Int64
			var wg sync.WaitGroup
			start := time.Now()
			for range 64 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for i := next.Add(1) - 1; i < int64(b.N); i = next.Add(1) - 1 {
						if err := bc.convert([][]byte{cronTabJSON(fmt.Sprintf("ct-%05d", i))}); err != nil {
							b.Error(err)
							return
						}
					}
				}()
			}
			wg.Wait()
			b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "objects/s")
		})
	}
	const n = 5000
	list := make([][]byte, n)
	for i := range list {
		list[i] = cronTabJSON(fmt.Sprintf("ct-%05d", i))
	}
	for _, bc := range []struct {
		name    string
		convert func([][]byte) error
	}{{"list-5000/cel", celConvert}, {"list-5000/webhook-chunked", webhookConvert(coalesced)}} {
		b.Run(bc.name, func(b *testing.B) {
			for b.Loop() {
				if err := bc.convert(list); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(n*b.N)/b.Elapsed().Seconds(), "objects/s")
		})
	}
}

// BenchmarkCELConversionReads has 64 concurrent clients read single
// CronTabs through crdplane at the non-storage version, converted by CEL
// rules on one crdplane and by the example webhook (coalesced, the
// default) on another, and at the storage version (no conversion): each
// run reads b.N times in each of the three phases, one after the other.
func BenchmarkCELConversionReads(b *testing.B) {
	const clients, objects = 64, 256
	w := startBenchWebhook(b)
	whP, whClient := startConversionPlatformWith(b, platform.Config{}, w, objects)

	celP, cfg := platformtest.StartConfig(b, platform.Config{})
	platformtest.CreateCRD(b, dynamic.NewForConfigOrDie(cfg), platformtest.Object(b, []byte(celConversionCRD)))
	celClient := platformtest.HTTPClient(celP)
	url := celP.URL + "/apis/example.com/v1beta1/namespaces/default/crontabs"
	for i := range objects {
		if code := do(b, celClient, celP, http.MethodPost, url, cronTabJSON(fmt.Sprintf("ct-%05d", i))); code != http.StatusCreated {
			b.Fatalf("create: HTTP %d", code)
		}
	}
	readAll(b, celClient, celP, "v1", clients, objects, 2*clients)
	readAll(b, whClient, whP, "v1", clients, objects, 2*clients)
	b.Run("64-clients", func(b *testing.B) {
		// The three phases in turn, in each run: same machine state.
		for _, ph := range []struct {
			name    string
			p       *platform.Platform
			c       *http.Client
			version string
		}{{"stored", celP, celClient, "v1beta1"}, {"cel", celP, celClient, "v1"}, {"webhook", whP, whClient, "v1"}} {
			start := time.Now()
			lat := readAll(b, ph.c, ph.p, ph.version, clients, objects, b.N)
			b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), ph.name+"-reads/s")
			b.ReportMetric(ms(percentile(lat, 0.5)), ph.name+"-p50-ms")
			b.ReportMetric(ms(percentile(lat, 0.99)), ph.name+"-p99-ms")
		}
	})
}
