package inject

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/require"
	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
)

func reviewBody(t testing.TB, kind metav1.GroupVersionKind, obj any) []byte {
	raw, err := json.Marshal(obj)
	require.NoError(t, err)
	b, err := json.Marshal(admissionv1.AdmissionReview{
		TypeMeta: metav1.TypeMeta{APIVersion: "admission.k8s.io/v1", Kind: "AdmissionReview"},
		Request: &admissionv1.AdmissionRequest{
			UID: types.UID("uid-1"), Kind: kind, Namespace: "ns", Operation: admissionv1.Create,
			Object: runtime.RawExtension{Raw: raw},
		},
	})
	require.NoError(t, err)
	return b
}

var podKind = metav1.GroupVersionKind{Version: "v1", Kind: "Pod"}

func post(t *testing.T, body []byte) (*httptest.ResponseRecorder, *admissionv1.AdmissionReview) {
	rec := httptest.NewRecorder()
	Handler{Config: DefaultConfig()}.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/mutate", bytes.NewReader(body)))
	if rec.Code != http.StatusOK {
		return rec, nil
	}
	var out admissionv1.AdmissionReview
	require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &out))
	return rec, &out
}

func TestHandlerResponses(t *testing.T) {
	for _, tc := range []struct {
		name    string
		body    []byte
		code    int
		errText string // 400 body
		patch   bool
		warning string
	}{
		{"injects", reviewBody(t, podKind, appPod(nil)), 200, "", true, ""},
		{"not opted in", reviewBody(t, podKind, appPod(func(p *corev1.Pod) { p.Labels = nil })), 200, "", false, ""},
		{"skipped with reason", reviewBody(t, podKind, appPod(func(p *corev1.Pod) { p.Spec.Containers[0].Ports = nil })), 200, "", true, `qas-proxy not injected: no container has a port named "http"`},
		{"wrong kind", reviewBody(t, metav1.GroupVersionKind{Group: "apps", Version: "v1", Kind: "Deployment"}, appPod(nil)), 200, "", false, "request is for apps/v1, Kind=Deployment, want core/v1 Pod"},
		{"undecodable pod", reviewBody(t, podKind, []int{1}), 200, "", false, "decode Pod"},
		{"not JSON", []byte("{"), 400, "decode AdmissionReview", false, ""},
		{"wrong apiVersion", []byte(`{"apiVersion":"admission.k8s.io/v1beta1","kind":"AdmissionReview","request":{}}`), 400, `want admission.k8s.io/v1 AdmissionReview, got apiVersion "admission.k8s.io/v1beta1"`, false, ""},
		{"no request", []byte(`{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview"}`), 400, "AdmissionReview has no request", false, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec, out := post(t, tc.body)
			require.Equal(t, tc.code, rec.Code, rec.Body.String())
			if tc.code != 200 {
				require.Contains(t, rec.Body.String(), tc.errText)
				return
			}
			require.Equal(t, "admission.k8s.io/v1", out.APIVersion)
			r := out.Response
			require.Equal(t, types.UID("uid-1"), r.UID)
			require.True(t, r.Allowed, "never block pod creation")
			require.Equal(t, tc.patch, len(r.Patch) > 0)
			if tc.patch {
				require.Equal(t, admissionv1.PatchTypeJSONPatch, *r.PatchType)
			}
			if tc.warning == "" {
				require.Empty(t, r.Warnings)
			} else {
				require.Len(t, r.Warnings, 1)
				require.Contains(t, r.Warnings[0], tc.warning)
			}
		})
	}
}

func TestHandlerRejectsGET(t *testing.T) {
	rec := httptest.NewRecorder()
	Handler{}.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/mutate", nil))
	require.Equal(t, http.StatusMethodNotAllowed, rec.Code)
}

// FuzzHandler checks that no body makes the handler panic and that every 200 answer
// is a v1 AdmissionReview with a response.
func FuzzHandler(f *testing.F) {
	f.Add(reviewBody(f, podKind, appPod(nil)))
	f.Add(reviewBody(f, podKind, appPod(func(p *corev1.Pod) { p.Annotations = map[string]string{AnnotationAppPort: "70000"} })))
	f.Add([]byte(`{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"kind":{"version":"v1","kind":"Pod"},"object":null}}`))
	f.Add([]byte("null"))
	f.Fuzz(func(t *testing.T, body []byte) {
		rec := httptest.NewRecorder()
		Handler{Config: DefaultConfig()}.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/mutate", bytes.NewReader(body)))
		switch rec.Code {
		case http.StatusOK:
			var out admissionv1.AdmissionReview
			if err := json.Unmarshal(rec.Body.Bytes(), &out); err != nil || out.Response == nil || !out.Response.Allowed {
				t.Fatalf("bad 200 answer %q: %v", rec.Body.String(), err)
			}
		case http.StatusBadRequest:
			if rec.Body.Len() == 0 {
				t.Fatal("400 without a reason")
			}
		default:
			t.Fatalf("unexpected status %d", rec.Code)
		}
	})
}
