package platform_test

import (
	"context"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"

	"github.com/crdplane/crdplane/pkg/etcdtls/etcdtlstest"
	"github.com/crdplane/crdplane/platform"
	"github.com/crdplane/crdplane/platform/platformtest"
	"github.com/crdplane/crdplane/services/storage/etcdtest"
)

// TestExternalEtcdTLS runs the platform on an external etcd that requires
// client certificates: the storage reaches it, and so does the registry's
// leader election (its controllers establish a CRD).
func TestExternalEtcdTLS(t *testing.T) {
	pki := etcdtlstest.New(t)
	endpoint := etcdtest.StartTLS(t, pki)
	_, rc := platformtest.StartConfig(t, platform.Config{EtcdEndpoints: []string{endpoint}, EtcdTLS: pki.ClientConfig()})
	dc, err := dynamic.NewForConfig(rc)
	if err != nil {
		t.Fatal(err)
	}
	platformtest.CreateCRD(t, dc, platformtest.Object(t, []byte(platformtest.CronTabCRD)))
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	ct := platformtest.Object(t, []byte(`{"apiVersion":"stable.example.com/v1","kind":"CronTab","metadata":{"name":"x"},"spec":{"cronSpec":"* * * * */5"}}`))
	if _, err := dc.Resource(platformtest.CronTabs).Namespace("default").Create(ctx, ct, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := dc.Resource(platformtest.CronTabs).Namespace("default").Get(ctx, "x", metav1.GetOptions{}); err != nil {
		t.Fatal(err)
	}
}
