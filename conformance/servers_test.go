package conformance

import (
	"os/exec"
	"strings"
	"testing"
	"time"
)

func TestStartProcess(t *testing.T) {
	brace := func(line string) (string, bool) { return line, strings.HasPrefix(line, "{") }
	for _, tc := range []struct {
		name    string
		script  string
		want    string
		wantErr string
	}{
		// The line wanted after others; output after it is drained (the
		// process would block on a full pipe otherwise and not exit).
		{name: "found", script: `echo starting; echo '{"URL":"u"}'; echo '{"late":1}'; head -c 200000 /dev/zero | tr '\0' x; echo; echo bye >&2`, want: `{"URL":"u"}`},
		{name: "never printed", script: `echo warming >&2; exec sleep 30`, wantErr: "test did not start in 1s: warming"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cmd := exec.Command("sh", "-c", tc.script)
			got, logs, err := startProcess("test", cmd, time.Second, brace)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err %v, want %q", err, tc.wantErr)
				}
				if werr := cmd.Wait(); werr == nil {
					t.Fatal("the process was not killed")
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("startProcess: %q %v, want %q", got, err, tc.want)
			}
			done := make(chan error, 1)
			go func() { done <- cmd.Wait() }()
			select {
			case err := <-done:
				if err != nil {
					t.Fatalf("the process did not exit cleanly: %v", err)
				}
			case <-time.After(10 * time.Second):
				_ = cmd.Process.Kill()
				t.Fatal("the process blocked: its stdout is not drained")
			}
			if !strings.Contains(logs.String(), "bye") {
				t.Fatalf("stderr not kept: %q", logs.String())
			}
		})
	}
	if _, _, err := startProcess("missing", exec.Command("/nonexistent/binary"), time.Second, brace); err == nil || !strings.Contains(err.Error(), "start /nonexistent/binary") {
		t.Fatalf("a missing binary: %v", err)
	}
}
