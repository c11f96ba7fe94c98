// capwrap: an OCI runtime wrapper for hosts whose capability bounding set lacks some
// capabilities (a VM sandbox). It removes from the container's spec every capability the
// bounding set lacks, and, when CAP_SYS_RESOURCE is missing, a negative oomScoreAdj (lowering
// it needs that capability), then execs the real runc with the same arguments.
package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

var capNames = []string{"CAP_CHOWN", "CAP_DAC_OVERRIDE", "CAP_DAC_READ_SEARCH", "CAP_FOWNER",
	"CAP_FSETID", "CAP_KILL", "CAP_SETGID", "CAP_SETUID", "CAP_SETPCAP",
	"CAP_LINUX_IMMUTABLE", "CAP_NET_BIND_SERVICE", "CAP_NET_BROADCAST", "CAP_NET_ADMIN",
	"CAP_NET_RAW", "CAP_IPC_LOCK", "CAP_IPC_OWNER", "CAP_SYS_MODULE", "CAP_SYS_RAWIO",
	"CAP_SYS_CHROOT", "CAP_SYS_PTRACE", "CAP_SYS_PACCT", "CAP_SYS_ADMIN", "CAP_SYS_BOOT",
	"CAP_SYS_NICE", "CAP_SYS_RESOURCE", "CAP_SYS_TIME", "CAP_SYS_TTY_CONFIG", "CAP_MKNOD",
	"CAP_LEASE", "CAP_AUDIT_WRITE", "CAP_AUDIT_CONTROL", "CAP_SETFCAP", "CAP_MAC_OVERRIDE",
	"CAP_MAC_ADMIN", "CAP_SYSLOG", "CAP_WAKE_ALARM", "CAP_BLOCK_SUSPEND", "CAP_AUDIT_READ",
	"CAP_PERFMON", "CAP_BPF", "CAP_CHECKPOINT_RESTORE"}

// missing: the capabilities this process's bounding set lacks.
func missing() map[string]bool {
	out := map[string]bool{}
	data, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return out
	}
	for _, line := range strings.Split(string(data), "\n") {
		if v, ok := strings.CutPrefix(line, "CapBnd:"); ok {
			bits, err := strconv.ParseUint(strings.TrimSpace(v), 16, 64)
			if err != nil {
				return out
			}
			for i, name := range capNames {
				if bits&(1<<uint(i)) == 0 {
					out[name] = true
				}
			}
		}
	}
	return out
}

func filterProcess(proc map[string]any, gone map[string]bool) {
	if caps, ok := proc["capabilities"].(map[string]any); ok {
		for set, v := range caps {
			list, ok := v.([]any)
			if !ok {
				continue
			}
			kept := []any{}
			for _, c := range list {
				if s, _ := c.(string); !gone[s] {
					kept = append(kept, c)
				}
			}
			caps[set] = kept
		}
	}
	if gone["CAP_SYS_RESOURCE"] {
		if adj, ok := proc["oomScoreAdj"].(float64); ok && adj < 0 {
			proc["oomScoreAdj"] = 0
		}
	}
}

// rewrite edits a spec (config.json: the process under "process") or a process file.
func rewrite(path string, whole bool, gone map[string]bool) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	var doc map[string]any
	if err := json.Unmarshal(data, &doc); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	if whole {
		if proc, ok := doc["process"].(map[string]any); ok {
			filterProcess(proc, gone)
		}
	} else {
		filterProcess(doc, gone)
	}
	out, err := json.Marshal(doc)
	if err != nil {
		return err
	}
	return os.WriteFile(path, out, 0o600)
}

func realRunc(self string) string {
	if p := os.Getenv("CAPWRAP_RUNC"); p != "" {
		return p
	}
	for _, p := range []string{"/usr/sbin/runc", "/usr/bin/runc", "/usr/local/sbin/runc", "/usr/local/bin/runc"} {
		if st, err := os.Stat(p); err == nil && !st.IsDir() {
			if r, _ := filepath.EvalSymlinks(p); r != self {
				return p
			}
		}
	}
	return "runc"
}

func main() {
	args := os.Args[1:]
	gone := missing()
	if len(gone) > 0 {
		cmd, bundle, process := "", ".", ""
		for i := 0; i < len(args); i++ {
			a := args[i]
			val := func() string {
				if k, v, ok := strings.Cut(a, "="); ok && strings.HasPrefix(k, "-") {
					return v
				}
				if i+1 < len(args) {
					i++
					return args[i]
				}
				return ""
			}
			switch {
			case a == "--bundle" || a == "-b" || strings.HasPrefix(a, "--bundle="):
				bundle = val()
			case a == "--process" || a == "-p" || strings.HasPrefix(a, "--process="):
				process = val()
			case cmd == "" && (a == "create" || a == "run" || a == "exec"):
				cmd = a
			}
		}
		var err error
		switch {
		case cmd == "exec" && process != "":
			err = rewrite(process, false, gone)
		case cmd == "create" || cmd == "run":
			err = rewrite(filepath.Join(bundle, "config.json"), true, gone)
		}
		if err != nil {
			fmt.Fprintf(os.Stderr, "capwrap: %v\n", err)
			os.Exit(1)
		}
	}
	self, _ := filepath.EvalSymlinks("/proc/self/exe")
	runc := realRunc(self)
	err := syscall.Exec(runc, append([]string{runc}, args...), os.Environ())
	fmt.Fprintf(os.Stderr, "capwrap: exec %s: %v\n", runc, err)
	os.Exit(1)
}
