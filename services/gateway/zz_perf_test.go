package gateway

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"sync"
	"testing"

	commonv1 "github.com/crdplane/crdplane/proto/crdplane/common/v1"
	storagev1 "github.com/crdplane/crdplane/proto/crdplane/storage/v1"
)

func BenchmarkZZList(b *testing.B) {
	t := &testing.T{}
	_ = t
	g := newTestGatewayB(b)
	etcd := g.backends.Storage.Client()
	var wg sync.WaitGroup
	work := make(chan int)
	for range 16 {
		wg.Go(func() {
			for i := range work {
				name := fmt.Sprintf("l-%04d", i)
				obj := fmt.Sprintf(`{"apiVersion":"stable.example.com/v1","kind":"CronTab","metadata":{"annotations":{"note":"%0560d"},"creationTimestamp":"2026-01-01T00:00:00Z","generation":1,"labels":{"app":"bench","team":"platform","tier":"backend"},"name":%q,"namespace":"default","uid":"6f1d2c3e-0000-4000-8000-%012d"},"spec":{"cronSpec":"* * * * */5","image":"registry.example.com/team/my-awesome-cron-image:v1.2.3","replicas":5}}`, 0, name, i)
				etcd.Put(context.Background(), "/registry/stable.example.com/crontabs/default/"+name, obj)
			}
		})
	}
	for i := range 2000 {
		work <- i
	}
	close(work)
	wg.Wait()
	b.Run("etcd", func(b *testing.B) {
		for b.Loop() {
			etcd.Get(context.Background(), "/registry/stable.example.com/crontabs/default/", clientv3WithPrefix()...)
		}
	})
	b.Run("storage-grpc", func(b *testing.B) {
		for b.Loop() {
			g.backends.StorageClient.List(context.Background(), &storagev1.ListRequest{Prefix: "/registry/stable.example.com/crontabs/default/", Options: &commonv1.ListOptions{}})
		}
	})
	b.Run("http", func(b *testing.B) {
		for b.Loop() {
			req, _ := http.NewRequest("GET", g.srv.URL+crontabs, nil)
			req.Header.Set("Authorization", "Bearer "+testToken)
			resp, _ := g.srv.Client().Do(req)
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
	})
}
