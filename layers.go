package mcplimit

// layer names the part of the admission that refused a request.
type layer uint8

const (
	layerPreauth layer = iota
	layerTenant
	layerGroup
	layerQuota
	layerGroupQuota
	layerToolQuota
	layerGlobal
	layerConcurrency
	layerAnonymous
	layerStore
	layerRequest // the request as sent: body rules, argument bounds, identity headers
	numLayers
)

// layerNames are the values of `data.limit` and of the `layer` label.
var layerNames = [numLayers]string{
	"preauth", "tenant", "group", "quota", "group_quota", "tool_quota",
	"global", "concurrency", "anonymous", "store", "request",
}

// layerCodes are the values of `data.code`.
var layerCodes = [numLayers]string{
	"PREAUTH_RATE_LIMITED", "TENANT_RATE_LIMITED", "GROUP_RATE_LIMITED",
	"QUOTA_EXHAUSTED", "QUOTA_EXHAUSTED", "QUOTA_EXHAUSTED",
	"GLOBAL_RATE_LIMITED", "CONCURRENCY_LIMITED", "ANONYMOUS_RATE_LIMITED",
	"STORE_UNAVAILABLE", "INVALID_REQUEST",
}

// String returns the layer's name as `data.limit` and metrics show it.
func (l layer) String() string { return layerNames[l] }
