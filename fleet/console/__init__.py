"""The fleet console: a read-only web view of the GPU fleet, bounded by each viewer's RBAC (issue 43).

``viewers`` says who is looking; ``oidc`` logs a person in through an OpenID Connect
provider; ``tokens`` checks a bearer token with the API server's TokenReview. Every read the
console makes impersonates the viewer, so Kubernetes RBAC decides what each one sees.
"""
