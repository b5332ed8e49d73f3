// Package version holds the version QAS binaries were built as. Release builds (the
// Dockerfiles) set it with -ldflags "-X github.com/qas-dev/qas/internal/version.Version=v1.2.3".
package version

// Version is "dev" unless set at link time.
var Version = "dev"
