#!/bin/sh
# A Java runtime for Spark (pyspark, from the test extras), which tests/test_result_store_spark.py
# starts locally on 127.0.0.1 to read the result store as a lab's cluster would. pyspark 4 needs
# Java 17: Debian 12's default. Debian/Ubuntu; idempotent.
set -eu
. "$(dirname "$0")/install-missing.sh"

if command -v java >/dev/null 2>&1 && java -version 2>&1 | grep -q 'version "\(1[7-9]\|2[0-9]\)'; then
    exit 0
fi
export DEBIAN_FRONTEND=noninteractive
install_missing openjdk-17-jre-headless
java -version 2>&1 | head -1
