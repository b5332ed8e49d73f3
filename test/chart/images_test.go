package chart

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
)

// instruction is one Dockerfile instruction with its continuation lines joined.
type instruction struct {
	cmd  string // upper case: FROM, RUN, ...
	args string
}

// stage is one FROM and what follows it.
type stage struct {
	from         string
	instructions []instruction
}

func parseDockerfile(t *testing.T, path string) []stage {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var stages []stage
	var cur strings.Builder
	flush := func() {
		line := strings.TrimSpace(cur.String())
		cur.Reset()
		if line == "" {
			return
		}
		cmd, args, _ := strings.Cut(line, " ")
		in := instruction{cmd: strings.ToUpper(cmd), args: strings.TrimSpace(args)}
		if in.cmd == "FROM" {
			stages = append(stages, stage{from: in.args})
			return
		}
		if len(stages) > 0 {
			stages[len(stages)-1].instructions = append(stages[len(stages)-1].instructions, in)
		}
	}
	for _, line := range strings.Split(string(raw), "\n") {
		trimmed := strings.TrimSpace(line)
		if strings.HasPrefix(trimmed, "#") {
			continue
		}
		if cont, ok := strings.CutSuffix(trimmed, "\\"); ok {
			cur.WriteString(cont + " ")
			continue
		}
		cur.WriteString(trimmed)
		flush()
	}
	flush()
	return stages
}

func (s stage) all(cmd string) []string {
	var out []string
	for _, in := range s.instructions {
		if in.cmd == cmd {
			out = append(out, in.args)
		}
	}
	return out
}

var reNumericUser = regexp.MustCompile(`^([0-9]+)(?::([0-9]+))?$`)

// TestDockerfiles checks the images' invariants without a Docker engine: multi-stage,
// a static (CGO_ENABLED=0), trimmed build stamped with VERSION, a distroless/static or
// scratch final stage with no RUN (no shell needed), a numeric non-root USER, an
// exec-form ENTRYPOINT, the OCI labels, and every package it builds exists.
func TestDockerfiles(t *testing.T) {
	root := repoRoot(t)
	cases := []struct {
		file     string
		binaries []string // built into the image
	}{
		{"Dockerfile.proxy", []string{"qas-proxy"}},
		{"Dockerfile.decider", []string{"qas-decider", "qas-collector", "qas-example-app"}},
	}
	for _, tc := range cases {
		t.Run(tc.file, func(t *testing.T) {
			stages := parseDockerfile(t, filepath.Join(root, tc.file))
			if len(stages) < 2 {
				t.Fatalf("%d stages, want a build stage and a runtime stage", len(stages))
			}
			build, final := stages[0], stages[len(stages)-1]
			runs := strings.Join(build.all("RUN"), "\n")
			for _, want := range []string{"CGO_ENABLED=0", "-trimpath", "-ldflags", "-s -w", "internal/version.Version=${VERSION}"} {
				if !strings.Contains(runs, want) {
					t.Errorf("build stage RUN lacks %q", want)
				}
			}
			if !containsArg(build, "VERSION") || !containsArg(final, "VERSION") {
				t.Error("ARG VERSION must be declared in the build and the final stage")
			}
			for _, b := range tc.binaries {
				dirs, _ := filepath.Glob(filepath.Join(root, "*", "cmd", b))
				dirs2, _ := filepath.Glob(filepath.Join(root, "*", "*", "cmd", b))
				dirs = append(dirs, dirs2...)
				if len(dirs) != 1 {
					t.Errorf("binary %s: %d packages named */cmd/%s", b, len(dirs), b)
					continue
				}
				rel, _ := filepath.Rel(root, dirs[0])
				if !strings.Contains(runs, "./"+rel) {
					t.Errorf("build stage does not build ./%s", rel)
				}
				if _, err := os.Stat(filepath.Join(dirs[0], "main.go")); err != nil {
					t.Errorf("%s: %v", rel, err)
				}
			}
			if !strings.HasPrefix(final.from, "gcr.io/distroless/static") && final.from != "scratch" {
				t.Errorf("final stage FROM %q, want distroless/static or scratch", final.from)
			}
			if r := final.all("RUN"); len(r) > 0 || len(final.all("SHELL")) > 0 {
				t.Errorf("final stage runs shell commands %v: the runtime image has no shell", r)
			}
			users := final.all("USER")
			if len(users) != 1 {
				t.Fatalf("final stage USER %v, want exactly one", users)
			}
			m := reNumericUser.FindStringSubmatch(users[0])
			if m == nil {
				t.Errorf("USER %q is not numeric (uid[:gid]): Kubernetes' runAsNonRoot cannot verify a name", users[0])
			} else if uid, _ := strconv.Atoi(m[1]); uid == 0 || m[2] == "0" {
				t.Errorf("USER %q is root", users[0])
			}
			eps := final.all("ENTRYPOINT")
			var ep []string
			if len(eps) != 1 || json.Unmarshal([]byte(eps[0]), &ep) != nil || len(ep) == 0 {
				t.Errorf("ENTRYPOINT %v, want one exec-form (JSON array) entrypoint", eps)
			}
			labels := strings.Join(final.all("LABEL"), " ")
			for _, l := range []string{"title", "description", "version", "revision", "source", "licenses", "url"} {
				if !strings.Contains(labels, "org.opencontainers.image."+l+"=") {
					t.Errorf("no label org.opencontainers.image.%s", l)
				}
			}
			if !strings.Contains(labels, `org.opencontainers.image.version="${VERSION}"`) {
				t.Error("the version label does not carry ${VERSION}")
			}
		})
	}
}

func containsArg(s stage, name string) bool {
	for _, a := range s.all("ARG") {
		if a == name || strings.HasPrefix(a, name+"=") {
			return true
		}
	}
	return false
}

// TestChartCommandsInImage: every binary the chart runs from the decider image is
// built into /usr/local/bin by Dockerfile.decider.
func TestChartCommandsInImage(t *testing.T) {
	stages := parseDockerfile(t, filepath.Join(repoRoot(t), "Dockerfile.decider"))
	final := stages[len(stages)-1]
	if copies := strings.Join(final.all("COPY"), " "); !strings.Contains(copies, "/out/ /usr/local/bin/") {
		t.Fatalf("final stage COPY %q does not put the binaries in /usr/local/bin", copies)
	}
	runs := strings.Join(stages[0].all("RUN"), " ")
	r := newHelm(t).template(t, "")
	for _, o := range r.objs {
		if o.GetKind() != "Deployment" {
			continue
		}
		for _, c := range convert[appsv1.Deployment](t, o).Spec.Template.Spec.Containers {
			bin, ok := strings.CutPrefix(c.Command[0], "/usr/local/bin/")
			if !ok || !strings.Contains(runs, "/cmd/"+bin) {
				t.Errorf("%s runs %s, which Dockerfile.decider does not build into /usr/local/bin", o.GetName(), c.Command[0])
			}
		}
	}
}
