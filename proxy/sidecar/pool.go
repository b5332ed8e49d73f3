package sidecar

// The pooled data plane's names (docs/pooling.md): the decider creates, per workload
// whose QueueAutoscaler has routing pooled, a Secret and a Role named PoolingName, and
// a front Deployment and Service named FrontName; the webhook points the workload's
// sidecars at them; the collector finds the fronts by FrontOfLabel.
const (
	// PoolingPrefix names the workload's pooling Secret, Role and RoleBinding.
	PoolingPrefix = "qas-pooling-"
	// FrontPrefix names the workload's front Deployment and Service.
	FrontPrefix = "qas-front-"
	// FrontOfLabel is on the front's pods (and its Deployment and Service): the
	// workload the front pools for.
	FrontOfLabel = "qas.dev/front-of"
	// PoolPortName is the front Service's port (and the front container's) that
	// sidecars overflow to and pull from.
	PoolPortName = "qas-pool"
	// DefaultPoolPort is the front container's pool port number.
	DefaultPoolPort = 9902
	// PoolKeyVolume is the volume of the pooling Secret in the proxy's pod.
	PoolKeyVolume = "qas-pool-key"
	// PoolKeyDir is where the pooling Secret is mounted, read-only, in the proxy
	// container (never in the app's).
	PoolKeyDir = "/var/run/qas/pool"
	// PoolKeyItem is the Secret's key holding the 32-byte HMAC key, PoolKeyPath its
	// file; PoolPreviousKeyItem holds the key before the last rotation.
	PoolKeyItem         = "key"
	PoolKeyPath         = PoolKeyDir + "/" + PoolKeyItem
	PoolPreviousKeyItem = "previous"
	// PoolKeyBytes is the length of the pooling key.
	PoolKeyBytes = 32
	// MaxPoolingWorkloadName is the longest workload name that pools: FrontName must be
	// a DNS label (63 characters) for the Service.
	MaxPoolingWorkloadName = 63 - len(FrontPrefix)
)

// PoolingName is the name of workload's pooling Secret, Role and RoleBinding.
func PoolingName(workload string) string { return PoolingPrefix + workload }

// FrontName is the name of workload's front Deployment and Service.
func FrontName(workload string) string { return FrontPrefix + workload }
