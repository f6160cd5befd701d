"""The worked Pima example of Alvarez (section 4), rebuilt by hand from the paper's text.

Figure 5 gives the Weka j48 tree; the text extraction lost one relation symbol:
the second "Glucose concentration <= 94.5" under "Age > 28.5" is "> 94.5" (leaf C3
needs Glucose > 94.5, as Table 3 and the text say). Leaf values are the class-1
fractions from the (cases/errors) counts. Table 2 gives cases 188 and 63.

The min/max statistics are those of the UCI Pima data (Glucose 0-199, blood
pressure 0-122, BMI 0-67.1, pedigree 0.078-2.42, Age 21-81); the paper's Tables 4
and 5 match them to the printed 3 decimals. The standard-deviation statistics are
the full data set's; the paper estimated them on a subset it does not give, so
its "standard" distances are not reproducible exactly (see the tests).
"""

from __future__ import annotations

import numpy as np

from builders import make_forest
from lumber.ir import Forest, Task

FEATURES = ["Glucose", "BloodPressure", "BMI", "Pedigree", "Age"]

C1, C2, C3, C4 = 98 / 136, 1.0, 23 / 28, 9 / 10
"""Class-1 fractions of the labelled leaves (the class-1 leaves of Figure 5)."""
STAR = 14 / 125
"""The leaf both cases reach (asterisked in Figure 5)."""

TREE = (
    "Glucose", 137.5,
    ("BMI", 26.3,
     1 / 98,
     ("Age", 28.5,
      ("Glucose", 127.5,
       STAR,
       ("BloodPressure", 73.0,
        ("Age", 21.5, 0.0, ("Pedigree", 0.188, 0.0, C4)),
        0.0)),
      ("Glucose", 94.5,
       ("Glucose", 43.2, C2, 3 / 30),
       ("Pedigree", 0.546, 29 / 75, C3)))),
    C1,
)

CASES = np.array([
    # Glucose, BloodPressure, BMI, Pedigree, Age   (Table 2)
    [90.0, 68.0, 38.2, 0.503, 27.0],   # case 188
    [93.0, 50.0, 28.7, 0.356, 23.0],   # case 63
])
CASE_IDS = (188, 63)

MINMAX_REFERENCE = np.array([
    [0.0, 0.0, 0.0, 0.078, 21.0],
    [199.0, 122.0, 67.1, 2.42, 81.0],
])
"""Two rows whose per-feature range is the Pima range (scale='minmax' reads ranges)."""

MEAN = np.array([120.894531, 69.105469, 31.992578, 0.471876, 33.240885])
STD = np.array([31.972618, 19.355807, 7.884160, 0.331329, 11.760232])
STD_REFERENCE = np.stack([MEAN - STD, MEAN + STD])
"""Two rows with the Pima means and standard deviations (population std of 2 rows = STD)."""

# Table 3: the sensitive tests of both cases (the same under both metrics)
TABLE3 = {("Age", "<=", 28.5), ("Pedigree", "<=", 0.546), ("Glucose", "<=", 94.5)}
# Table 4 (Min/Max metric): distance to the decision surface
TABLE4_MINMAX = {188: 0.038, 63: 0.123}
# Table 5 (Min/Max metric): distance to each class-1 leaf
TABLE5 = {
    "C1": {188: 0.239, 63: 0.224},
    "C2": {188: 0.236, 63: 0.266},
    "C3": {188: 0.038, 63: 0.123},
    "C4": {188: 0.188, 63: 0.143},  # 63: the text's own numbers give 34.5/199 = 0.173 (see tests)
}


def pima_tree() -> Forest:
    """Figure 5 as a single-tree binary classifier (predict_proba = [1 - v, v])."""
    return make_forest([TREE], FEATURES, task=Task.BINARY, classes=[0, 1])
