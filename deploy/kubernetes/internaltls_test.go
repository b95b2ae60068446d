package kubernetes

import (
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
)

// The cert-manager.io/v1 fields the cert-manager overlay uses, mirrored
// from cert-manager's API (github.com/cert-manager/cert-manager
// pkg/apis/certmanager/v1) so that the manifests decode strictly without
// importing it: a field that is not here is a typo or a field to add.
type cmObjectMeta struct {
	Name      string `json:"name"`
	Namespace string `json:"namespace,omitempty"`
	Labels    map[string]string
}

type cmIssuerRef struct {
	Name  string `json:"name"`
	Kind  string `json:"kind,omitempty"`
	Group string `json:"group,omitempty"`
}

type cmCertificate struct {
	APIVersion string       `json:"apiVersion"`
	Kind       string       `json:"kind"`
	Metadata   cmObjectMeta `json:"metadata"`
	Spec       struct {
		SecretName  string      `json:"secretName"`
		CommonName  string      `json:"commonName,omitempty"`
		IsCA        bool        `json:"isCA,omitempty"`
		URIs        []string    `json:"uris,omitempty"`
		DNSNames    []string    `json:"dnsNames,omitempty"`
		Usages      []string    `json:"usages,omitempty"`
		Duration    string      `json:"duration,omitempty"`
		RenewBefore string      `json:"renewBefore,omitempty"`
		IssuerRef   cmIssuerRef `json:"issuerRef"`
		PrivateKey  *struct {
			Algorithm      string `json:"algorithm,omitempty"`
			Size           int    `json:"size,omitempty"`
			RotationPolicy string `json:"rotationPolicy,omitempty"`
		} `json:"privateKey,omitempty"`
	} `json:"spec"`
}

func (c *cmCertificate) GetName() string { return c.Metadata.Name }

type cmIssuer struct {
	APIVersion string       `json:"apiVersion"`
	Kind       string       `json:"kind"`
	Metadata   cmObjectMeta `json:"metadata"`
	Spec       struct {
		SelfSigned *struct{} `json:"selfSigned,omitempty"`
		CA         *struct {
			SecretName string `json:"secretName"`
		} `json:"ca,omitempty"`
	} `json:"spec"`
}

func (i *cmIssuer) GetName() string { return i.Metadata.Name }

// checkInternalTLS: every crdplane container mounts the internal TLS
// Secret of its own service, crdplane-<service>-internal-tls (another's
// would give it that service's identity), where its --grpc-tls-* flags
// read it; where Certificates issue those Secrets (the cert-manager
// overlay), each names the service's identity, is usable as client and
// server, and comes from an Issuer that exists.
func checkInternalTLS(t *testing.T, objs *objects) {
	t.Helper()
	certs := map[string]*cmCertificate{}
	for _, c := range objs.certificates {
		certs[c.Spec.SecretName] = c
	}
	issuers := map[string]bool{}
	for _, i := range objs.issuers {
		issuers[i.Metadata.Name] = true
	}
	for _, c := range objs.certificates {
		if !issuers[c.Spec.IssuerRef.Name] || c.Spec.IssuerRef.Kind != "Issuer" {
			t.Errorf("Certificate/%s: issuer %+v does not exist", c.Metadata.Name, c.Spec.IssuerRef)
		}
	}
	for _, w := range objs.workloads() {
		for _, c := range w.pod.Spec.Containers {
			m := imageBinary.FindStringSubmatch(c.Image)
			if m == nil || m[1] == "etcd" {
				continue
			}
			svc := m[1]
			where := w.name + "/" + c.Name
			secret := "crdplane-" + svc + "-internal-tls"
			var dir string
			for _, m := range c.VolumeMounts {
				if v := volume(w.pod.Spec.Volumes, m.Name); v != nil && v.Secret != nil && v.Secret.SecretName == secret {
					dir = m.MountPath
				}
			}
			if dir == "" {
				t.Errorf("%s: does not mount the Secret %s", where, secret)
				continue
			}
			for _, f := range []string{"--grpc-tls-cert-file=" + dir + "/tls.crt", "--grpc-tls-key-file=" + dir + "/tls.key", "--grpc-tls-ca-file=" + dir + "/ca.crt"} {
				if !slices.Contains(c.Args, f) {
					t.Errorf("%s: no %s", where, f)
				}
			}
			if len(objs.certificates) == 0 {
				continue
			}
			cert := certs[secret]
			if cert == nil {
				t.Errorf("%s: no Certificate issues its Secret %s", where, secret)
				continue
			}
			if !slices.Equal(cert.Spec.URIs, []string{"spiffe://crdplane/" + svc}) {
				t.Errorf("Certificate/%s: uris %v, want the identity spiffe://crdplane/%s", cert.Metadata.Name, cert.Spec.URIs, svc)
			}
			if !slices.Contains(cert.Spec.Usages, "client auth") || !slices.Contains(cert.Spec.Usages, "server auth") {
				t.Errorf("Certificate/%s: usages %v lack client auth or server auth", cert.Metadata.Name, cert.Spec.Usages)
			}
			if !slices.Contains(cert.Spec.DNSNames, "crdplane-"+svc) {
				t.Errorf("Certificate/%s: does not name crdplane-%s, the host its callers dial", cert.Metadata.Name, svc)
			}
		}
	}
}

func volume(vs []corev1.Volume, name string) *corev1.Volume {
	for i := range vs {
		if vs[i].Name == name {
			return &vs[i]
		}
	}
	return nil
}
