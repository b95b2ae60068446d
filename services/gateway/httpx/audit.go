package httpx

import (
	"fmt"
	"io"
	"log/slog"
	"os"
	"slices"
	"strings"
	"time"

	"gopkg.in/natefinch/lumberjack.v2"
	utilnet "k8s.io/apimachinery/pkg/util/net"
	auditinternal "k8s.io/apiserver/pkg/apis/audit"
	auditv1 "k8s.io/apiserver/pkg/apis/audit/v1"
	"k8s.io/apiserver/pkg/audit"
	"k8s.io/apiserver/pkg/audit/policy"
	webhookutil "k8s.io/apiserver/pkg/util/webhook"
	"k8s.io/apiserver/plugin/pkg/audit/buffered"
	auditlog "k8s.io/apiserver/plugin/pkg/audit/log"
	auditwebhook "k8s.io/apiserver/plugin/pkg/audit/webhook"
)

// Audit backend modes (--audit-log-mode, --audit-webhook-mode), as
// kube-apiserver's: blocking writes each event before the request goes on,
// batch buffers them and writes them in the background (an event that
// does not fit the buffer is dropped), blocking-strict also fails the
// request when its RequestReceived event cannot be written.
const (
	AuditModeBlocking       = "blocking"
	AuditModeBlockingStrict = "blocking-strict"
	AuditModeBatch          = "batch"
)

// AuditModes are the modes the audit backends accept.
var AuditModes = []string{AuditModeBatch, AuditModeBlocking, AuditModeBlockingStrict}

// AuditConfig configures audit logging as kube-apiserver's --audit-*
// flags do: events of the audit.k8s.io/v1 Policy in PolicyFile, written to
// LogPath (JSON lines, "-" for stdout; rotated by size as
// --audit-log-maxsize/maxbackup/maxage say) and/or posted to the webhook
// of WebhookConfigFile (an EventList per batch).
type AuditConfig struct {
	PolicyFile string

	LogPath       string
	LogMaxAge     int // days (0: no limit)
	LogMaxBackups int // files (0: no limit)
	LogMaxSize    int // MiB before rotation (0: lumberjack's 100)
	LogCompress   bool
	LogFormat     string // json (default) or legacy
	LogMode       string // blocking (default), batch, blocking-strict

	WebhookConfigFile     string
	WebhookMode           string // batch (default), blocking, blocking-strict
	WebhookInitialBackoff time.Duration
	// WebhookDial dials the webhook, as kube-apiserver's egress
	// selector's controlplane selection does (nil: directly).
	WebhookDial utilnet.DialFunc `json:"-"`
}

// Enabled reports whether cfg writes events anywhere.
func (cfg AuditConfig) Enabled() bool {
	return cfg.PolicyFile != "" && (cfg.LogPath != "" || cfg.WebhookConfigFile != "")
}

// Validate checks the flags without reading the files.
func (cfg AuditConfig) Validate() error {
	// kube-apiserver's messages (k8s.io/apiserver/pkg/server/options)
	for _, m := range []struct{ plugin, mode string }{{"log", cfg.LogMode}, {"webhook", cfg.WebhookMode}} {
		if m.mode != "" && !slices.Contains(AuditModes, m.mode) {
			return fmt.Errorf("invalid audit %s mode %s, allowed modes are %q", m.plugin, m.mode, strings.Join(AuditModes, ","))
		}
	}
	if cfg.LogFormat != "" && !slices.Contains(auditlog.AllowedFormats, cfg.LogFormat) {
		return fmt.Errorf("invalid audit log format %s, allowed formats are %q", cfg.LogFormat, strings.Join(auditlog.AllowedFormats, ","))
	}
	for _, n := range []struct {
		flag string
		v    int
	}{{"--audit-log-maxage", cfg.LogMaxAge}, {"--audit-log-maxbackup", cfg.LogMaxBackups}, {"--audit-log-maxsize", cfg.LogMaxSize}} {
		if n.v < 0 {
			return fmt.Errorf("%s %v can't be a negative number", n.flag, n.v)
		}
	}
	return nil
}

// Auditor is the edge's audit: the policy deciding each request's level
// and stages, and the backends its events go to (k8s.io/apiserver's).
type Auditor struct {
	policy  audit.PolicyRuleEvaluator
	backend audit.Backend
	stop    chan struct{}
}

// NewAuditor reads the policy and opens the backends cfg names; nil when
// cfg records nothing. Run starts the backends, Shutdown flushes them.
func NewAuditor(cfg AuditConfig) (*Auditor, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if !cfg.Enabled() {
		if cfg.LogPath != "" || cfg.WebhookConfigFile != "" {
			slog.Default().Warn("gateway: an audit backend is configured without --audit-policy-file: no events are recorded")
		}
		return nil, nil
	}
	p, err := policy.LoadPolicyFromFile(cfg.PolicyFile)
	if err != nil {
		return nil, fmt.Errorf("--audit-policy-file: %w", err)
	}
	var backends []audit.Backend
	if cfg.LogPath != "" {
		w, err := auditLogWriter(cfg)
		if err != nil {
			return nil, fmt.Errorf("--audit-log-path: %w", err)
		}
		format := cfg.LogFormat
		if format == "" {
			format = auditlog.FormatJson
		}
		b := auditlog.NewBackend(w, format, auditv1.SchemeGroupVersion)
		backends = append(backends, withMode(b, cfg.LogMode, AuditModeBlocking, logBatchConfig()))
	}
	if cfg.WebhookConfigFile != "" {
		backoff := cfg.WebhookInitialBackoff
		if backoff <= 0 {
			backoff = auditwebhook.DefaultInitialBackoffDelay
		}
		b, err := auditwebhook.NewBackend(cfg.WebhookConfigFile, auditv1.SchemeGroupVersion, webhookutil.DefaultRetryBackoffWithInitialDelay(backoff), cfg.WebhookDial)
		if err != nil {
			return nil, fmt.Errorf("--audit-webhook-config-file: %w", err)
		}
		backends = append(backends, withMode(b, cfg.WebhookMode, AuditModeBatch, webhookBatchConfig()))
	}
	backend := backends[0]
	if len(backends) > 1 {
		backend = audit.Union(backends...)
	}
	return &Auditor{policy: policy.NewPolicyRuleEvaluator(p), backend: backend, stop: make(chan struct{})}, nil
}

// auditLogWriter is stdout for "-", else the file (created 0600 when
// missing, as kube-apiserver creates it) behind a rotating writer.
func auditLogWriter(cfg AuditConfig) (io.Writer, error) {
	if cfg.LogPath == "-" {
		return os.Stdout, nil
	}
	f, err := os.OpenFile(cfg.LogPath, os.O_CREATE|os.O_APPEND|os.O_RDWR, 0o600)
	if err != nil {
		return nil, err
	}
	if err := f.Close(); err != nil {
		return nil, err
	}
	return &lumberjack.Logger{Filename: cfg.LogPath, MaxAge: cfg.LogMaxAge, MaxBackups: cfg.LogMaxBackups, MaxSize: cfg.LogMaxSize, Compress: cfg.LogCompress}, nil
}

// withMode wraps b as kube-apiserver's mode flags do: batch in a buffered
// backend, blocking ignoring the backend's errors, blocking-strict as is
// (a request whose RequestReceived event cannot be written fails).
func withMode(b audit.Backend, mode, def string, batch buffered.BatchConfig) audit.Backend {
	if mode == "" {
		mode = def
	}
	switch mode {
	case AuditModeBatch:
		return buffered.NewBackend(b, batch)
	case AuditModeBlocking:
		return ignoreErrors{b}
	}
	return b
}

// ignoreErrors is upstream's blocking mode: a write error is logged by the
// plugin but the request goes on.
type ignoreErrors struct{ audit.Backend }

func (i ignoreErrors) ProcessEvents(ev ...*auditinternal.Event) bool {
	i.Backend.ProcessEvents(ev...)
	return true
}

// The batch defaults of kube-apiserver's --audit-log-batch-* and
// --audit-webhook-batch-* flags.
func logBatchConfig() buffered.BatchConfig {
	return buffered.BatchConfig{BufferSize: 10000, MaxBatchSize: 1, MaxBatchWait: 0, ThrottleEnable: false, AsyncDelegate: false}
}

func webhookBatchConfig() buffered.BatchConfig {
	return buffered.BatchConfig{BufferSize: 10000, MaxBatchSize: 400, MaxBatchWait: 30 * time.Second,
		ThrottleEnable: true, ThrottleQPS: 10, ThrottleBurst: 15, AsyncDelegate: true}
}

// Run starts the backends (the batch ones' workers).
func (a *Auditor) Run() error {
	if a == nil {
		return nil
	}
	if err := a.backend.Run(a.stop); err != nil {
		return fmt.Errorf("audit backend: %w", err)
	}
	return nil
}

// Shutdown writes the buffered events and stops the backends.
func (a *Auditor) Shutdown() {
	if a == nil {
		return
	}
	select {
	case <-a.stop:
		return
	default:
	}
	close(a.stop)
	a.backend.Shutdown()
}
