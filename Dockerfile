# kueue-doctor operator image with a Docker engine: `docker build -t ghcr.io/kueue-doctor/kueue-doctor:0.1.0 .`
# Without one (and without a registry base image): `bash hack/image/build.sh` (docs/install.md).
# The tag should equal the version in pyproject.toml and the chart's appVersion. Both install the
# dependencies from requirements.lock with their hashes (`bash hack/lock.sh` refreshes it).
# Build stage: install the package from this repository into a virtualenv, its engine compiled by mypyc
# (setup.py; mypy and gcc stay in this stage, outside the virtualenv).
FROM python:3.11-slim AS build
ENV PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_NO_CACHE_DIR=1
WORKDIR /src
RUN apt-get update && apt-get install -y --no-install-recommends gcc libc6-dev && rm -rf /var/lib/apt/lists/* \
 && pip install "mypy>=1.11" "setuptools>=68" wheel
COPY requirements.lock pyproject.toml setup.py README.md ./
COPY operator/ operator/
RUN python -m venv /opt/kueue-doctor \
 && /opt/kueue-doctor/bin/pip install --require-hashes -r requirements.lock \
 && KUEUE_DOCTOR_COMPILE=1 pip wheel --no-build-isolation --no-deps --wheel-dir /tmp/wheels . \
 && /opt/kueue-doctor/bin/pip install --no-deps /tmp/wheels/kueue_doctor-*.whl \
 && /opt/kueue-doctor/bin/kueue-doctor --help >/dev/null

# Runtime stage: the same base image, the virtualenv only, a non-root user.
FROM python:3.11-slim
LABEL org.opencontainers.image.title="kueue-doctor" \
      org.opencontainers.image.description="Why is my Kueue job not running? One AdmissionDiagnosis per Workload." \
      org.opencontainers.image.licenses="Apache-2.0" \
      org.opencontainers.image.source="https://github.com/kueue-doctor/kueue-doctor"
COPY --from=build /opt/kueue-doctor /opt/kueue-doctor
# Read-only root filesystem in the Deployment: no .pyc writes, HOME on the /tmp emptyDir.
ENV PATH=/opt/kueue-doctor/bin:$PATH \
    PYTHONUNBUFFERED=1 \
    PYTHONDONTWRITEBYTECODE=1 \
    HOME=/tmp
# 65532 is the conventional "nonroot" uid/gid; the chart and manifests/base run as it too.
USER 65532:65532
EXPOSE 8080 8081
ENTRYPOINT ["kueue-doctor"]
CMD ["run"]
