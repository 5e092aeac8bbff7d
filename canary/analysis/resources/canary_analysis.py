"""spark-submit's application file for the canary analysis (canary.analysis.job), shipped with the package so that
an installed kafka-canary can submit it: `spark-submit <this file> --observations SOURCE --out DIR …`."""

import sys

from canary.analysis.job import main

if __name__ == "__main__":
    sys.exit(main())
