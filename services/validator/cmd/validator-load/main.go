// Command validator-load drives ValidatorService.Admit with a fixed request
// from concurrent workers for a while and reports the throughput and
// latency percentiles. With several -targets it balances the requests round
// robin over them on the client side (grpcx.Dial with a manual resolver
// holding every address), which ghz cannot do; `make loadtest-validator`
// uses it to measure one replica against two.
//
//	validator-load -targets 127.0.0.1:17003,127.0.0.1:17013 -c 50 -d 10s
//	validator-load -print-request   # the request as JSON, for ghz -D
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/resolver"
	"google.golang.org/grpc/resolver/manual"
	"google.golang.org/protobuf/encoding/protojson"
	"sigs.k8s.io/yaml"

	"github.com/crdplane/crdplane/pkg/grpcx"
	commonv1 "github.com/crdplane/crdplane/proto/crdplane/common/v1"
	validatorv1 "github.com/crdplane/crdplane/proto/crdplane/validator/v1"
)

// defaultObject is a CronTab of testdata/crds/crontab-cel.yaml: valid, so
// that every one of its CEL rules runs.
const defaultObject = `apiVersion: cel.example.com/v1
kind: CronTab
metadata:
  name: nightly
  namespace: default
  uid: 6a0b1c2d-0000-4000-8000-000000000001
  creationTimestamp: "2024-05-31T12:56:35Z"
  generation: 1
  labels: {app: cron, tier: batch}
spec:
  cronSpec: "*/5 * * * *"
  image: "nginx:1.27"
  replicas: 2
  maxReplicas: 5
  env:
  - {name: TZ, value: UTC}
  - {name: LOG_LEVEL, value: info}
  labels: {app: cron}
status:
  availableReplicas: 2
  phase: Running
`

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "validator-load:", err)
		os.Exit(1)
	}
}

func run() error {
	var (
		targets     = flag.String("targets", "127.0.0.1:7003", "comma-separated validator addresses (host:port), balanced round robin")
		crd         = flag.String("crd", "crontabs.cel.example.com", "CRD name")
		version     = flag.String("version", "v1", "CRD version")
		objectFile  = flag.String("object", "", "object to admit (YAML or JSON file; default: a CronTab with CEL rules)")
		concurrency = flag.Int("c", 50, "concurrent workers")
		duration    = flag.Duration("d", 10*time.Second, "measured duration")
		warmup      = flag.Duration("warmup", time.Second, "unmeasured warm-up before")
		printReq    = flag.Bool("print-request", false, "print the AdmitRequest as JSON (for ghz -D) and exit")
	)
	flag.Parse()

	obj := []byte(defaultObject)
	if *objectFile != "" {
		var err error
		if obj, err = os.ReadFile(*objectFile); err != nil {
			return err
		}
	}
	objJSON, err := yaml.YAMLToJSON(obj)
	if err != nil {
		return fmt.Errorf("object: %w", err)
	}
	req := &validatorv1.AdmitRequest{
		Crd:       &commonv1.CRDRef{Name: *crd},
		Version:   *version,
		Operation: validatorv1.Operation_OPERATION_CREATE,
		Object:    objJSON,
	}
	if *printReq {
		b, err := protojson.Marshal(req)
		if err != nil {
			return err
		}
		fmt.Println(string(b))
		return nil
	}

	addrs := strings.Split(*targets, ",")
	conn, err := dial(addrs)
	if err != nil {
		return err
	}
	defer func() { _ = conn.Close() }()
	client := validatorv1.NewValidatorServiceClient(conn)

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	// One call first: the object must be valid.
	resp, err := client.Admit(ctx, req)
	if err != nil {
		return fmt.Errorf("first Admit: %w", err)
	}
	if len(resp.GetCauses()) > 0 {
		return fmt.Errorf("first Admit: the object is invalid: %v", resp.GetCauses())
	}

	res := drive(ctx, client, req, *concurrency, *warmup, *duration)
	slog.Debug("done", "requests", res.requests)
	fmt.Printf("replicas=%d concurrency=%d requests=%d errors=%d req/s=%.0f p50=%s p90=%s p99=%s\n",
		len(addrs), *concurrency, res.requests, res.errors, float64(res.requests)/res.elapsed.Seconds(),
		res.percentile(50), res.percentile(90), res.percentile(99))
	if res.errors > 0 {
		return fmt.Errorf("%d requests failed, first: %v", res.errors, res.firstErr)
	}
	return nil
}

// dial connects to every address with round-robin balancing: a manual
// resolver reports them all as one target's addresses.
func dial(addrs []string) (grpcx.Conn, error) {
	r := manual.NewBuilderWithScheme("validator-load")
	state := resolver.State{}
	for _, a := range addrs {
		state.Addresses = append(state.Addresses, resolver.Address{Addr: strings.TrimSpace(a)})
	}
	r.InitialState(state)
	return grpcx.Dial(r.Scheme()+":///validators", grpc.WithResolvers(r))
}

type result struct {
	requests, errors int64
	firstErr         error
	elapsed          time.Duration
	latencies        []time.Duration // sorted
}

func (r *result) percentile(p int) time.Duration {
	if len(r.latencies) == 0 {
		return 0
	}
	i := (len(r.latencies)*p + 99) / 100
	return r.latencies[min(max(i-1, 0), len(r.latencies)-1)].Round(time.Microsecond)
}

// drive runs concurrency workers calling Admit back to back: a warm-up,
// then the measured duration.
func drive(ctx context.Context, client validatorv1.ValidatorServiceClient, req *validatorv1.AdmitRequest, concurrency int, warmup, duration time.Duration) *result {
	var (
		measuring atomic.Bool
		stop      atomic.Bool
		errs      atomic.Int64
		firstErr  atomic.Value
		mu        sync.Mutex
		all       []time.Duration
		wg        sync.WaitGroup
	)
	for range concurrency {
		wg.Add(1)
		go func() {
			defer wg.Done()
			lat := make([]time.Duration, 0, 1<<16)
			for !stop.Load() && ctx.Err() == nil {
				start := time.Now()
				_, err := client.Admit(ctx, req)
				d := time.Since(start)
				if !measuring.Load() {
					continue
				}
				if err != nil && !errors.Is(ctx.Err(), context.Canceled) {
					errs.Add(1)
					firstErr.CompareAndSwap(nil, err)
					continue
				}
				lat = append(lat, d)
			}
			mu.Lock()
			all = append(all, lat...)
			mu.Unlock()
		}()
	}
	time.Sleep(warmup)
	measuring.Store(true)
	start := time.Now()
	select {
	case <-time.After(duration):
	case <-ctx.Done():
	}
	measuring.Store(false)
	elapsed := time.Since(start)
	stop.Store(true)
	wg.Wait()
	slices.Sort(all)
	r := &result{requests: int64(len(all)), errors: errs.Load(), elapsed: elapsed, latencies: all}
	if e, ok := firstErr.Load().(error); ok {
		r.firstErr = e
	}
	return r
}
