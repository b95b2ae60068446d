package storage

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	clientv3 "go.etcd.io/etcd/client/v3"

	storagev1 "github.com/crdplane/crdplane/proto/crdplane/storage/v1"
)

// Benchmarks compare the service (gRPC over an in-process connection, JSON
// splicing, etcd transaction) with raw etcd client calls on the same embedded
// etcd (fsync on, as in production) in the same run:
//
//	go test -run '^$' -bench . -count 5

func benchEnv(b *testing.B) *env {
	return sharedWith(b, "bench", func(c *Config) { c.UnsafeNoFsync = false })
}

// benchCronTab is a ~1 KiB custom resource.
var benchCronTab = func() []byte {
	obj := map[string]any{
		"apiVersion": "stable.example.com/v1",
		"kind":       "CronTab",
		"metadata": map[string]any{
			"name": "bench", "namespace": "default", "uid": "6f1b4a8e-6c1e-4b8f-9d55-2f6a7c1e9b10",
			"generation": 1, "creationTimestamp": "2026-01-01T00:00:00Z",
			"labels":      map[string]string{"app": "bench", "tier": "backend", "team": "storage"},
			"annotations": map[string]string{"note": strings.Repeat("an ordinary annotation value ", 8)},
		},
		"spec": map[string]any{
			"cronSpec": "* * * * */5", "image": "registry.example.com/team/cron-image:1.2.3", "replicas": 3,
			"template": map[string]any{"containers": []any{map[string]any{"name": "c", "image": "x", "args": []string{"--a", "--b", "--c"}}}},
			"metadata": map[string]any{"resourceVersion": "not-the-object's"},
			"schedule": strings.Repeat("0 ", 150),
		},
		"status": map[string]any{"phase": "Ready", "lastScheduleTime": "2026-01-01T00:05:00Z"},
	}
	data, err := json.Marshal(obj)
	if err != nil {
		panic(err)
	}
	return data
}()

var benchSeq int

func benchKey(kind string) string {
	benchSeq++
	return fmt.Sprintf("/registry/bench.example.com/%s/default/o-%09d", kind, benchSeq)
}

func BenchmarkCreate(b *testing.B) {
	e := benchEnv(b)
	ctx := context.Background()
	b.SetBytes(int64(len(benchCronTab)))
	for b.Loop() {
		if _, err := e.client.Create(ctx, &storagev1.CreateRequest{Key: benchKey("grpc"), Object: benchCronTab}); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkEtcdPut(b *testing.B) {
	e := benchEnv(b)
	ctx := context.Background()
	b.SetBytes(int64(len(benchCronTab)))
	for b.Loop() {
		if _, err := e.svc.Client().Put(ctx, benchKey("raw"), string(benchCronTab)); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkCreateNoGRPC is Create without the gRPC hop (where the time goes).
func BenchmarkCreateNoGRPC(b *testing.B) {
	e := benchEnv(b)
	ctx := context.Background()
	b.SetBytes(int64(len(benchCronTab)))
	for b.Loop() {
		if _, _, err := e.svc.create(ctx, benchKey("direct"), benchCronTab); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkEtcdTxnCreate is the etcd transaction Create runs, raw.
func BenchmarkEtcdTxnCreate(b *testing.B) {
	e := benchEnv(b)
	ctx := context.Background()
	b.SetBytes(int64(len(benchCronTab)))
	for b.Loop() {
		key := benchKey("txn")
		resp, err := e.svc.Client().Txn(ctx).
			If(clientv3.Compare(clientv3.CreateRevision(key), "=", 0)).
			Then(clientv3.OpPut(key, string(benchCronTab))).
			Commit()
		if err != nil || !resp.Succeeded {
			b.Fatal(err)
		}
	}
}

func BenchmarkGet(b *testing.B) {
	e := benchEnv(b)
	ctx := context.Background()
	key := benchKey("get")
	if _, err := e.client.Create(ctx, &storagev1.CreateRequest{Key: key, Object: benchCronTab}); err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		if _, err := e.client.Get(ctx, &storagev1.GetRequest{Key: key}); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkEtcdGet(b *testing.B) {
	e := benchEnv(b)
	ctx := context.Background()
	key := benchKey("get")
	if _, err := e.svc.Client().Put(ctx, key, string(benchCronTab)); err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		if _, err := e.svc.Client().Get(ctx, key); err != nil {
			b.Fatal(err)
		}
	}
}

// The resourceVersion splice against the full decode/encode it replaces.

func BenchmarkWithResourceVersion(b *testing.B) {
	b.SetBytes(int64(len(benchCronTab)))
	for b.Loop() {
		if _, err := withResourceVersion(benchCronTab, 123456); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkStripResourceVersion(b *testing.B) {
	obj, err := withResourceVersion(benchCronTab, 123456)
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(obj)))
	for b.Loop() {
		if _, err := stripResourceVersion(obj); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkUnmarshalMarshal(b *testing.B) {
	b.SetBytes(int64(len(benchCronTab)))
	for b.Loop() {
		var m map[string]any
		if err := json.Unmarshal(benchCronTab, &m); err != nil {
			b.Fatal(err)
		}
		m["metadata"].(map[string]any)["resourceVersion"] = "123456"
		if _, err := json.Marshal(m); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkListUnpaged lists 20,000 ~1 KiB objects without a limit
// through the service, reading etcd in chunks of each size ("all": one
// range read, as before chunking); B/op is what the service allocates.
func BenchmarkListUnpaged(b *testing.B) {
	e := sharedWith(b, "bench-list")
	const n = 20000
	prefix := "/registry/bench.example.com/lists/default/"
	ctx := context.Background()
	if resp, err := e.client.List(ctx, &storagev1.ListRequest{Prefix: prefix}); err != nil || len(resp.Objects) < n {
		errs := make(chan error, 16)
		for w := range 16 {
			go func() {
				var err error
				for i := w; i < n && err == nil; i += 16 {
					name := fmt.Sprintf("o-%06d", i)
					obj := bytes.Replace(benchCronTab, []byte(`"name":"bench"`), []byte(`"name":"`+name+`"`), 1)
					_, err = e.client.Create(ctx, &storagev1.CreateRequest{Key: prefix + name, Object: obj})
				}
				errs <- err
			}()
		}
		for range 16 {
			if err := <-errs; err != nil {
				b.Fatal(err)
			}
		}
	}
	defer func(c int64) { unpagedChunk = c }(unpagedChunk)
	for _, chunk := range []int64{1000, 5000, 0} {
		name := fmt.Sprint(chunk)
		if chunk == 0 {
			name, chunk = "all", 1<<40
		}
		b.Run("chunk="+name, func(b *testing.B) {
			unpagedChunk = chunk
			b.ReportAllocs()
			for b.Loop() {
				resp, err := e.client.List(ctx, &storagev1.ListRequest{Prefix: prefix})
				if err != nil || len(resp.Objects) != n {
					b.Fatal(len(resp.GetObjects()), err)
				}
			}
		})
	}
}
