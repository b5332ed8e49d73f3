package inject

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"

	"go.uber.org/zap"
	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// maxBody bounds an AdmissionReview body (the apiserver's own limit is 3 MiB objects).
const maxBody = 8 << 20

// DecodeReview parses an admission/v1 AdmissionReview carrying a Pod CREATE request.
func DecodeReview(body []byte) (*admissionv1.AdmissionReview, *corev1.Pod, error) {
	var review admissionv1.AdmissionReview
	if err := json.Unmarshal(body, &review); err != nil {
		return nil, nil, fmt.Errorf("decode AdmissionReview: %w", err)
	}
	if review.APIVersion != "admission.k8s.io/v1" || review.Kind != "AdmissionReview" {
		return nil, nil, fmt.Errorf("want admission.k8s.io/v1 AdmissionReview, got apiVersion %q kind %q", review.APIVersion, review.Kind)
	}
	if review.Request == nil {
		return nil, nil, errors.New("AdmissionReview has no request")
	}
	if review.Request.Kind.Kind != "Pod" || review.Request.Kind.Group != "" {
		return &review, nil, fmt.Errorf("request is for %s, want core/v1 Pod", review.Request.Kind.String())
	}
	if len(review.Request.Object.Raw) == 0 {
		return &review, nil, errors.New("request carries no object")
	}
	var pod corev1.Pod
	if err := json.Unmarshal(review.Request.Object.Raw, &pod); err != nil {
		return &review, nil, fmt.Errorf("decode Pod: %w", err)
	}
	return &review, &pod, nil
}

// Handler serves POST /mutate for the apiserver.
type Handler struct {
	Config Config
	Log    *zap.Logger
}

// ServeHTTP answers an AdmissionReview. Undecodable bodies get 400 with the reason;
// a decodable review with a request that cannot be handled gets an allowed response
// (the pod is admitted unchanged) whose warning explains why.
func (h Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	log := h.Log
	if log == nil {
		log = zap.NewNop()
	}
	if r.Method != http.MethodPost {
		http.Error(w, "POST an admission.k8s.io/v1 AdmissionReview", http.StatusMethodNotAllowed)
		return
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, maxBody+1))
	if err != nil {
		http.Error(w, "read body: "+err.Error(), http.StatusBadRequest)
		return
	}
	if len(body) > maxBody {
		http.Error(w, fmt.Sprintf("body larger than %d bytes", maxBody), http.StatusRequestEntityTooLarge)
		return
	}
	review, pod, err := DecodeReview(body)
	if review == nil || review.Request == nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	resp := &admissionv1.AdmissionResponse{UID: review.Request.UID, Allowed: true}
	if err != nil {
		resp.Warnings = []string{"qas-proxy not injected: " + err.Error()}
		log.Warn("admission request not handled", zap.Error(err))
	} else {
		if pod.Namespace == "" {
			// A pod created with generateName, or without a namespace in its body,
			// is in the request's namespace.
			pod.Namespace = review.Request.Namespace
		}
		res, _ := h.Config.Mutate(pod)
		for _, w := range res.Warnings {
			resp.Warnings = append(resp.Warnings, "qas-proxy: "+w)
			log.Warn("injected with a warning", zap.String("namespace", review.Request.Namespace), zap.String("pod", podName(pod)), zap.String("warning", w))
		}
		if res.Skip != "" {
			log.Info("no injection", zap.String("namespace", review.Request.Namespace), zap.String("pod", podName(pod)), zap.String("reason", res.Skip))
			if OptedIn(pod) {
				resp.Warnings = []string{"qas-proxy not injected: " + res.Skip}
			}
		} else {
			log.Info("injected qas-proxy", zap.String("namespace", review.Request.Namespace), zap.String("pod", podName(pod)))
		}
		if len(res.Patch) > 0 {
			patch, err := MarshalPatch(res.Patch)
			if err != nil {
				resp.Result = &metav1.Status{Message: err.Error()}
			} else {
				pt := admissionv1.PatchTypeJSONPatch
				resp.Patch, resp.PatchType = patch, &pt
			}
		}
	}
	out := admissionv1.AdmissionReview{TypeMeta: review.TypeMeta, Response: resp}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(out)
}

func podName(p *corev1.Pod) string {
	if p.Name != "" {
		return p.Name
	}
	return p.GenerateName + "*"
}
