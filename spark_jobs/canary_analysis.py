"""The canary analysis as a Spark application file: `spark-submit spark_jobs/canary_analysis.py --observations
SOURCE --out DIR …` (the Airflow DAG's SparkSubmitOperator runs it). The job itself is canary.analysis.job;
`kafka-canary analyze` submits the same job from the installed package."""

import sys

from canary.analysis.job import main

if __name__ == "__main__":
    sys.exit(main())
