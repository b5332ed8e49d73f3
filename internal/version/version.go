// Package version says which build of QAS a binary is. Release builds (the
// Dockerfiles) stamp it with -ldflags "-X github.com/qas-dev/qas/internal/version.Version=v1.2.3";
// other builds report the main module's version that Go records (`go install
// github.com/qas-dev/qas/...@v1.2.3`, or a pseudo-version from the VCS checkout), else
// "dev".
package version

import (
	"fmt"
	"runtime"
	"runtime/debug"
)

// Version is "dev" unless set at link time.
var Version = "dev"

// Get returns the version this binary reports.
func Get() string { return resolve(Version, debug.ReadBuildInfo) }

// resolve prefers the link-time stamp, then the main module's version from the build
// info. "dev" (the Dockerfiles' default build argument) counts as no stamp, and
// "(devel)" is what Go records when it knows no version.
func resolve(stamp string, buildInfo func() (*debug.BuildInfo, bool)) string {
	if stamp != "" && stamp != "dev" {
		return stamp
	}
	if bi, ok := buildInfo(); ok && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
		return bi.Main.Version
	}
	return "dev"
}

// String is what --version prints for program: "qas-proxy v0.3.0 (go1.26.8, linux/amd64)".
func String(program string) string {
	return fmt.Sprintf("%s %s (%s, %s/%s)", program, Get(), runtime.Version(), runtime.GOOS, runtime.GOARCH)
}

// Labels are the labels of each binary's <program>_build_info metric (always 1): the
// version and the Go release it was built with.
func Labels() map[string]string {
	return map[string]string{"version": Get(), "goversion": runtime.Version()}
}
