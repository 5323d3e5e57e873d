// Subtly wrong: sends the data bits most significant first.
module uart_tx #(
    parameter CLKS_PER_BIT = 4
) (
    input  wire       clk,
    input  wire       rst,
    input  wire       start,
    input  wire [7:0] data,
    output reg        tx,
    output wire       busy
);
    localparam IDLE = 2'd0, START = 2'd1, DATA = 2'd2, STOP = 2'd3;

    reg [1:0] state;
    reg [7:0] shreg;
    reg [2:0] bit_index;
    reg [7:0] ticks;

    assign busy = (state != IDLE);

    always @(posedge clk) begin
        if (rst) begin
            state <= IDLE;
            tx    <= 1'b1;
            ticks <= 8'd0;
        end else begin
            case (state)
                IDLE: if (start) begin
                    shreg <= data;
                    state <= START;
                    tx    <= 1'b0;
                    ticks <= 8'd0;
                end
                START: if (ticks == CLKS_PER_BIT - 1) begin
                    state     <= DATA;
                    tx        <= shreg[7];
                    bit_index <= 3'd0;
                    ticks     <= 8'd0;
                end else ticks <= ticks + 8'd1;
                DATA: if (ticks == CLKS_PER_BIT - 1) begin
                    ticks <= 8'd0;
                    if (bit_index == 3'd7) begin
                        state <= STOP;
                        tx    <= 1'b1;
                    end else begin
                        bit_index <= bit_index + 3'd1;
                        tx        <= shreg[3'd6 - bit_index];
                    end
                end else ticks <= ticks + 8'd1;
                STOP: if (ticks == CLKS_PER_BIT - 1) begin
                    state <= IDLE;
                    ticks <= 8'd0;
                end else ticks <= ticks + 8'd1;
            endcase
        end
    end
endmodule
