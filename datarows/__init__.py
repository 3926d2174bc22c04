"""What a dataset's rows must be in TRL's formats, checked row by row: shared by the bot's catalog (a team's local
files, when the catalog loads) and the trainer (every row before its first step). Stands alone: the standard
library and orjson only, so both sides import it and neither imports the other."""

from datarows.formats import CONVERSATIONAL_TEXT, FORMAT_COLUMNS, DataFormat, detect_format, is_messages
from datarows.rows import SHOWN, RowProblem, SplitReport, check_file, row_problem, rows_problems

__all__ = [
    "CONVERSATIONAL_TEXT",
    "FORMAT_COLUMNS",
    "SHOWN",
    "DataFormat",
    "RowProblem",
    "SplitReport",
    "check_file",
    "detect_format",
    "is_messages",
    "row_problem",
    "rows_problems",
]
