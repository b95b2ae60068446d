package storage

import (
	"fmt"
	"sync/atomic"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// etcdLogger is the zap logger of etcd's server and client at a given level,
// without etcd's known-benign noise: its start-up warnings about the
// embedded configuration, and every message once the service is closing
// (etcd reports each closed listener as an error).
type etcdLogger struct {
	*zap.Logger
	closing *atomic.Bool
}

// benignEtcdMessages are etcd warnings about choices the embedded setup
// makes on purpose.
var benignEtcdMessages = map[string]bool{
	"Running http and grpc server on single port. This is not recommended for production.": true,
	"simple token is not cryptographically signed":                                         true,
}

func newEtcdLogger(level string) (etcdLogger, error) {
	lv, err := zapcore.ParseLevel(level)
	if err != nil {
		return etcdLogger{}, fmt.Errorf("etcd log level: %w", err)
	}
	zc := zap.NewProductionConfig()
	zc.Level = zap.NewAtomicLevelAt(lv)
	zc.OutputPaths = []string{"stderr"}
	zc.ErrorOutputPaths = []string{"stderr"}
	zc.Sampling = nil
	closing := new(atomic.Bool)
	lg, err := zc.Build(zap.WrapCore(func(c zapcore.Core) zapcore.Core {
		return filterCore{Core: c, closing: closing}
	}))
	if err != nil {
		return etcdLogger{}, fmt.Errorf("etcd logger: %w", err)
	}
	return etcdLogger{Logger: lg, closing: closing}, nil
}

// silence drops every later message (from Close on).
func (l etcdLogger) silence() { l.closing.Store(true) }

type filterCore struct {
	zapcore.Core
	closing *atomic.Bool
}

func (c filterCore) Check(ent zapcore.Entry, ce *zapcore.CheckedEntry) *zapcore.CheckedEntry {
	if c.closing.Load() || benignEtcdMessages[ent.Message] {
		return ce
	}
	return c.Core.Check(ent, ce)
}

func (c filterCore) With(fields []zapcore.Field) zapcore.Core {
	return filterCore{Core: c.Core.With(fields), closing: c.closing}
}
