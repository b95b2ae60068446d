package gateway

import (
	"flag"
	"strings"

	"github.com/crdplane/crdplane/services/gateway/httpx"
)

// Audit configures the audit log, with kube-apiserver's --audit-* flags
// (crdplane run has them too).
type Audit struct {
	httpx.AuditConfig
}

// RegisterFlags adds the audit flags to fs, with kube-apiserver v1.33's
// names and defaults.
func (a *Audit) RegisterFlags(fs *flag.FlagSet) {
	fs.StringVar(&a.PolicyFile, "audit-policy-file", "", "audit.k8s.io/v1 Policy deciding what is recorded of each request; without it nothing is")
	fs.StringVar(&a.LogPath, "audit-log-path", "", `file the audit events are written to as JSON lines ("-": standard output)`)
	fs.IntVar(&a.LogMaxAge, "audit-log-maxage", 0, "days to keep rotated audit log files (0: no limit)")
	fs.IntVar(&a.LogMaxBackups, "audit-log-maxbackup", 0, "rotated audit log files to keep (0: no limit)")
	fs.IntVar(&a.LogMaxSize, "audit-log-maxsize", 0, "megabytes an audit log file grows to before it is rotated (0: 100)")
	fs.BoolVar(&a.LogCompress, "audit-log-compress", false, "gzip rotated audit log files")
	fs.StringVar(&a.LogFormat, "audit-log-format", "json", "audit log format: json or legacy (one line of text per event)")
	fs.StringVar(&a.LogMode, "audit-log-mode", httpx.AuditModeBlocking, "how events reach the log: "+strings.Join(httpx.AuditModes, ", "))
	fs.StringVar(&a.WebhookConfigFile, "audit-webhook-config-file", "", "kubeconfig of a webhook the audit events are posted to (audit.k8s.io/v1 EventList)")
	fs.StringVar(&a.WebhookMode, "audit-webhook-mode", httpx.AuditModeBatch, "how events reach the webhook: "+strings.Join(httpx.AuditModes, ", "))
	fs.DurationVar(&a.WebhookInitialBackoff, "audit-webhook-initial-backoff", 0, "wait before retrying a failed webhook request (0: 10s)")
}
