package inject

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"net"
	"strings"
	"time"

	"go.uber.org/zap"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	"github.com/qas-dev/qas/decider/certs"
	"github.com/qas-dev/qas/internal/cli"
	"github.com/qas-dev/qas/internal/kubeconfig"
	"github.com/qas-dev/qas/internal/version"
	"github.com/qas-dev/qas/proxy/sidecar"
)

// Options configure the webhook process (`qas-decider webhook`).
type Options struct {
	Listen        string
	Kubeconfig    string
	Namespace     string
	SecretName    string
	WebhookConfig string
	DNSNames      string // comma-separated
	CertDir       string // cert-manager mode: tls.crt and tls.key are mounted here
	Image         string
	AdminPort     int
	// ProxyResources is the sidecar's resources as JSON (empty: DefaultConfig's).
	ProxyResources string
	// ProxyImagePullSecrets is a comma-separated list of Secrets the injected pods get
	// in imagePullSecrets, to pull the proxy image.
	ProxyImagePullSecrets string
	// Pooling makes the webhook watch QueueAutoscalers, so that the proxies of a
	// workload with routing pooled join its pooled data plane (pooling.go).
	Pooling bool
	Log     cli.LogOptions
}

// EnvPrefix is the prefix of the environment variables that override the webhook's
// flags (QAS_WEBHOOK_PROXY_IMAGE overrides --proxy-image).
const EnvPrefix = "QAS_WEBHOOK"

// FlagSet registers the webhook's flags (environment prefix EnvPrefix).
func (o *Options) FlagSet() *flag.FlagSet {
	fs := flag.NewFlagSet("qas-decider webhook", flag.ContinueOnError)
	fs.StringVar(&o.Listen, "listen", ":8443", "HTTPS address the apiserver calls (/mutate)")
	fs.StringVar(&o.Kubeconfig, "kubeconfig", "", "kubeconfig path (default: in-cluster)")
	fs.StringVar(&o.Namespace, "namespace", "qas-system", "namespace of the certificate Secret")
	fs.StringVar(&o.SecretName, "secret", "qas-webhook-tls", "Secret holding the self-managed CA and serving certificate")
	fs.StringVar(&o.WebhookConfig, "webhook-config", "qas-inject", "MutatingWebhookConfiguration whose caBundle is kept current")
	fs.StringVar(&o.DNSNames, "dns-names", "qas-webhook.qas-system.svc", "comma-separated DNS names (or IPs) of the webhook Service")
	fs.StringVar(&o.CertDir, "cert-dir", "", "cert-manager mode: read tls.crt/tls.key from this directory and manage no Secret or caBundle")
	fs.StringVar(&o.Image, "proxy-image", DefaultImage, "qas-proxy image to inject")
	fs.IntVar(&o.AdminPort, "admin-port", sidecar.DefaultAdminPort, "qas-proxy admin port")
	fs.StringVar(&o.ProxyResources, "proxy-resources", "", `resources of the injected qas-proxy container as JSON, e.g. {"requests":{"cpu":"50m","memory":"32Mi"},"limits":{"memory":"128Mi"}} (empty: that default)`)
	fs.StringVar(&o.ProxyImagePullSecrets, "proxy-image-pull-secrets", "", "comma-separated Secrets added to injected pods' imagePullSecrets for the qas-proxy image (each must exist in the pod's namespace)")
	fs.BoolVar(&o.Pooling, "pooling", true, "watch QueueAutoscalers (list and watch queueautoscalers, get replicasets) so that the proxies of workloads with routing: pooled get the pooling key and find their front")
	o.Log.Register(fs)
	return fs
}

// Validate checks the options and returns a cli.UsageError naming the bad flag.
func (o *Options) Validate() error {
	switch {
	case o.AdminPort < 1 || o.AdminPort > 65535:
		return cli.Usagef("admin-port", "must be a port number, got %d", o.AdminPort)
	case o.Image == "":
		return cli.Usagef("proxy-image", "must not be empty")
	case o.CertDir == "" && (o.Namespace == "" || o.SecretName == ""):
		return cli.Usagef("secret", "namespace and secret are required unless --cert-dir is set")
	case o.CertDir == "" && len(o.names()) == 0:
		return cli.Usagef("dns-names", "at least one name is required unless --cert-dir is set")
	}
	if _, err := o.proxyResources(); err != nil {
		return cli.Usagef("proxy-resources", "%v", err)
	}
	for _, name := range splitList(o.ProxyImagePullSecrets) {
		if errs := validation.IsDNS1123Subdomain(name); len(errs) > 0 {
			return cli.Usagef("proxy-image-pull-secrets", "%q is not a Secret name: %s", name, strings.Join(errs, "; "))
		}
	}
	return nil
}

// proxyResources parses --proxy-resources strictly (unknown fields and bad quantities
// are errors); empty gives DefaultConfig's.
func (o *Options) proxyResources() (corev1.ResourceRequirements, error) {
	if strings.TrimSpace(o.ProxyResources) == "" {
		return DefaultConfig().Resources, nil
	}
	var r corev1.ResourceRequirements
	dec := json.NewDecoder(strings.NewReader(o.ProxyResources))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&r); err != nil {
		return r, fmt.Errorf("not a container's resources in JSON: %w", err)
	}
	if dec.More() {
		return r, errors.New("trailing data after the JSON object")
	}
	return r, nil
}

func splitList(s string) []string {
	var out []string
	for _, v := range strings.Split(s, ",") {
		if v = strings.TrimSpace(v); v != "" {
			out = append(out, v)
		}
	}
	return out
}

func (o *Options) names() []string { return splitList(o.DNSNames) }

// Config validates the options and returns what the webhook injects with them: the
// sidecar's image, admin port, resources and pull secrets. It starts nothing, so
// that a deployment's flags can be checked for what they inject (test/chart does).
func (o *Options) Config() (Config, error) {
	if err := o.Validate(); err != nil {
		return Config{}, err
	}
	cfg := DefaultConfig()
	cfg.Image, cfg.AdminPort = o.Image, int32(o.AdminPort)
	cfg.Resources, _ = o.proxyResources() // checked by Validate
	cfg.ImagePullSecrets = splitList(o.ProxyImagePullSecrets)
	return cfg, nil
}

// PoolingSyncWarning is how long the webhook waits for the first list of
// QueueAutoscalers before it logs that pooling is not available yet.
const PoolingSyncWarning = 30 * time.Second

// Run serves the webhook until ctx ends, keeping its certificate current: rotated
// through the Secret and caBundle, or reloaded from CertDir every minute.
func Run(ctx context.Context, o Options, log *zap.Logger) error {
	cfg, err := o.Config()
	if err != nil {
		return err
	}
	reloader := &certs.Reloader{}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var cs kubernetes.Interface
	if o.CertDir == "" || o.Pooling {
		rc, err := kubeconfig.Load(o.Kubeconfig)
		if err != nil {
			return err
		}
		kube, err := kubernetes.NewForConfig(rc)
		if err != nil {
			return err
		}
		cs = kube
		if o.Pooling {
			dyn, err := dynamic.NewForConfig(rc)
			if err != nil {
				return err
			}
			lookup := NewQueueAutoscalerLookup(ctx, kube, dyn)
			// Serve at once: until the QueueAutoscalers are listed, pods are injected
			// without pooling, with a warning that says why.
			go func() {
				sctx, stop := context.WithTimeout(ctx, PoolingSyncWarning)
				defer stop()
				if !lookup.WaitForSync(sctx) && ctx.Err() == nil {
					log.Warn("QueueAutoscalers not listed yet: pods are injected without pooling until they are (can the webhook list and watch queueautoscalers?)",
						zap.Duration("after", PoolingSyncWarning))
				}
			}()
			cfg.Pooling = lookup
		}
	}
	errc := make(chan error, 2)
	ticker := time.NewTicker(time.Minute)
	defer ticker.Stop()
	if o.CertDir != "" {
		crt, key := o.CertDir+"/tls.crt", o.CertDir+"/tls.key"
		if err := certs.LoadFiles(reloader, crt, key); err != nil {
			return err
		}
		go func() {
			for {
				select {
				case <-ctx.Done():
					return
				case <-ticker.C:
					if err := certs.LoadFiles(reloader, crt, key); err != nil {
						log.Error("reload certificate", zap.Error(err))
					}
				}
			}
		}()
	} else {
		m := &certs.Manager{
			Client: cs, Namespace: o.Namespace, SecretName: o.SecretName, WebhookConfig: o.WebhookConfig,
			DNSNames: o.names(), Reloader: reloader, Log: log,
		}
		if _, err := m.Sync(ctx); err != nil {
			return err
		}
		go func() { errc <- m.Run(ctx, ticker.C) }()
	}
	srv := &Server{Addr: o.Listen, Handler: Handler{Config: cfg, Log: log}, GetCertificate: reloader.GetCertificate, Log: log,
		Ready: func(addr net.Addr) {
			log.Info("serving", zap.String("version", version.Get()), zap.String("listen", addr.String()),
				zap.String("proxyImage", cfg.Image), zap.String("certDir", o.CertDir))
		}}
	go func() { errc <- srv.Run(ctx) }()
	err = <-errc
	cancel()
	if errors.Is(err, context.Canceled) {
		return nil
	}
	return err
}
