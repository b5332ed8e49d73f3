package chart

import (
	"encoding/json"
	"os"
	"os/exec"
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
// a static (CGO_ENABLED=0), trimmed build stamped with VERSION (into internal/version,
// which every binary built imports; test/version checks the stamp reaches --version,
// the logs and /metrics), a distroless/static or
// scratch final stage with no RUN (no shell needed), a numeric non-root USER, an
// exec-form ENTRYPOINT, the OCI labels, and every package it builds exists.
func TestDockerfiles(t *testing.T) {
	root := repoRoot(t)
	cases := []struct {
		file     string
		binaries []string // built into the image
	}{
		{"Dockerfile.proxy", []string{"qas-proxy"}},
		{"Dockerfile.decider", []string{"qas-decider", "qas-collector", "qas-example-app", "qas-loadgen"}},
	}
	for _, tc := range cases {
		t.Run(tc.file, func(t *testing.T) {
			stages := parseDockerfile(t, filepath.Join(root, tc.file))
			if len(stages) < 2 {
				t.Fatalf("%d stages, want a build stage and a runtime stage", len(stages))
			}
			build, final := stages[0], stages[len(stages)-1]
			runs := strings.Join(build.all("RUN"), "\n")
			for _, want := range []string{"CGO_ENABLED=0", "-trimpath", "-ldflags", "-s -w"} {
				if !strings.Contains(runs, want) {
					t.Errorf("build stage RUN lacks %q", want)
				}
			}
			// The stamp: -X <package>.Version=${VERSION}, where <package> is this
			// module's internal/version and every binary built imports it (an -X on a
			// package that is not linked in is silently dropped).
			var stamped string
			if m := reVersionStamp.FindStringSubmatch(runs); m == nil {
				t.Errorf("build stage RUN has no -X <package>.Version=${VERSION} ldflag")
			} else if stamped = m[1]; stamped != modulePath(t, root)+"/internal/version" {
				t.Errorf("the ldflag stamps %s, want this module's internal/version", stamped)
			}
			var pkgs []string
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
				pkgs = append(pkgs, "./"+rel)
			}
			if stamped != "" && len(pkgs) == len(tc.binaries) {
				for pkg, deps := range listDeps(t, root, pkgs) {
					if !deps[stamped] {
						t.Errorf("%s does not import %s: the image's version stamp would go nowhere", pkg, stamped)
					}
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
			for _, l := range []string{"title", "description", "version", "revision", "source", "url"} {
				if !strings.Contains(labels, "org.opencontainers.image."+l+"=") {
					t.Errorf("no label org.opencontainers.image.%s", l)
				}
			}
			// The project has chosen no license: an image must not claim one.
			if _, err := os.Stat(filepath.Join(root, "LICENSE")); os.IsNotExist(err) && strings.Contains(labels, "org.opencontainers.image.licenses") {
				t.Error("label org.opencontainers.image.licenses, but the repository has no LICENSE")
			}
			if !strings.Contains(labels, `org.opencontainers.image.version="${VERSION}"`) {
				t.Error("the version label does not carry ${VERSION}")
			}
		})
	}
}

// dockerignore is a .dockerignore's patterns as Docker applies them: a pattern matches
// a path or any directory above it; * and ? stay within a path element, ** spans any.
type dockerignore []*regexp.Regexp

func parseDockerignore(t *testing.T, path string) dockerignore {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var out dockerignore
	for _, line := range strings.Split(string(raw), "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		if strings.HasPrefix(line, "!") {
			t.Fatalf("%s: exception %q: this check does not model exceptions", path, line)
		}
		p := strings.TrimPrefix(filepath.ToSlash(filepath.Clean(line)), "/")
		var re strings.Builder
		for i := 0; i < len(p); i++ {
			switch {
			case strings.HasPrefix(p[i:], "**/"):
				re.WriteString("(.*/)?")
				i += 2
			case strings.HasPrefix(p[i:], "**"):
				re.WriteString(".*")
				i++
			case p[i] == '*':
				re.WriteString("[^/]*")
			case p[i] == '?':
				re.WriteString("[^/]")
			default:
				re.WriteString(regexp.QuoteMeta(p[i : i+1]))
			}
		}
		out = append(out, regexp.MustCompile("^"+re.String()+"(/.*)?$"))
	}
	return out
}

func (d dockerignore) excludes(path string) bool {
	for _, re := range d {
		if re.MatchString(path) {
			return true
		}
	}
	return false
}

// TestDockerignore: the build context leaves out the repository's history and local
// build output, and keeps every file the images' builds read (go.mod, go.sum and the
// Go files of every package the binaries import from this module).
func TestDockerignore(t *testing.T) {
	root := repoRoot(t)
	ignore := parseDockerignore(t, filepath.Join(root, ".dockerignore"))
	for _, p := range []string{".git/HEAD", "bin/qas-proxy", "out/demo.json", "decider/app/app.test"} {
		if !ignore.excludes(p) {
			t.Errorf(".dockerignore sends %s to the build", p)
		}
	}
	for _, p := range []string{"decider/inject/inject.go", "bin.go", "outline/x.go"} {
		if ignore.excludes(p) {
			t.Errorf("the matcher wrongly excludes %s", p)
		}
	}
	var pkgs []string
	for _, f := range []string{"Dockerfile.decider", "Dockerfile.proxy"} {
		pkgs = append(pkgs, regexp.MustCompile(`\./[a-z/-]+/cmd/[a-z-]+`).FindAllString(strings.Join(parseDockerfile(t, filepath.Join(root, f))[0].all("RUN"), " "), -1)...)
	}
	if len(pkgs) < 5 {
		t.Fatalf("found only %v built by the Dockerfiles", pkgs)
	}
	cmd := exec.Command("go", append([]string{"list", "-deps", "-f", `{{if .Module}}{{if .Module.Main}}{{.Dir}}{{range .GoFiles}} {{.}}{{end}}{{range .EmbedFiles}} {{.}}{{end}}{{end}}{{end}}`}, pkgs...)...)
	cmd.Dir = root
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	needed := []string{"go.mod", "go.sum"}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		fields := strings.Fields(line)
		if len(fields) == 0 {
			continue
		}
		dir, err := filepath.Rel(root, fields[0])
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range fields[1:] {
			needed = append(needed, filepath.ToSlash(filepath.Join(dir, f)))
		}
	}
	if len(needed) < 50 {
		t.Fatalf("only %d files needed by the builds: %v", len(needed), needed)
	}
	for _, f := range needed {
		if ignore.excludes(f) {
			t.Errorf(".dockerignore leaves out %s, which the image build needs", f)
		}
	}
}

// reVersionStamp finds the package of a -X ...Version=${VERSION} ldflag.
var reVersionStamp = regexp.MustCompile(`-X ([^\s="]+)\.Version=\$\{VERSION\}`)

// modulePath is the module path in root's go.mod.
func modulePath(t *testing.T, root string) string {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(root, "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^module\s+(\S+)`).FindSubmatch(raw)
	if m == nil {
		t.Fatal("go.mod has no module line")
	}
	return string(m[1])
}

// listDeps returns, for each package pattern, the set of packages it imports
// directly or indirectly (`go list -deps`, one package at a time as the linker sees
// it).
func listDeps(t *testing.T, root string, pkgs []string) map[string]map[string]bool {
	t.Helper()
	out := map[string]map[string]bool{}
	for _, pkg := range pkgs {
		cmd := exec.Command("go", "list", "-deps", pkg)
		cmd.Dir = root
		raw, err := cmd.Output()
		if err != nil {
			t.Fatalf("go list -deps %s: %v", pkg, err)
		}
		deps := map[string]bool{}
		for _, p := range strings.Fields(string(raw)) {
			deps[p] = true
		}
		if len(deps) < 10 {
			t.Fatalf("go list -deps %s lists only %v", pkg, raw)
		}
		out[pkg] = deps
	}
	return out
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
